//! Safe model names: sanitising, hash suffixes for long and clashing names, reversibility and
//! determinism.

use mcpapp_bridge::ModelNames;

use crate::provider_accepts;

/// Asserts that every name maps to a distinct safe name that maps back.
fn assert_well_formed(names: &ModelNames, originals: &[&str]) {
    let mut seen = std::collections::HashSet::new();
    for original in originals {
        let model = names.to_model(original).unwrap();
        assert!(provider_accepts(model), "{original} -> {model}");
        assert!(seen.insert(model.to_owned()), "{model} used twice");
        assert_eq!(names.from_model(model), Some(*original));
    }
    assert_eq!(names.len(), seen.len());
}

/// The expected 8-hex suffix, computed here independently of the crate: FNV-1a 64 of the
/// name folded to 32 bits.
fn expected_suffix(name: &str) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in name.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    format!("{:08x}", (h ^ (h >> 32)) & 0xffff_ffff)
}

#[test]
fn dots_become_underscores_and_safe_names_are_kept() {
    let originals = ["grocery.get_stores", "get-low_stock9", "wx/forecast now"];
    let names = ModelNames::new(originals);
    assert_eq!(
        names.to_model("grocery.get_stores"),
        Some("grocery_get_stores")
    );
    assert_eq!(names.to_model("get-low_stock9"), Some("get-low_stock9"));
    assert_eq!(names.to_model("wx/forecast now"), Some("wx_forecast_now"));
    assert_eq!(
        names.from_model("grocery_get_stores"),
        Some("grocery.get_stores")
    );
    assert_eq!(names.to_model("unknown"), None);
    assert_eq!(names.from_model("grocery.get_stores"), None);
    assert_well_formed(&names, &originals);
}

#[test]
fn non_ascii_characters_become_one_underscore_each() {
    let names = ModelNames::new(["météo.prévision"]);
    assert_eq!(names.to_model("météo.prévision"), Some("m_t_o_pr_vision"));
}

#[test]
fn a_65_character_name_is_cut_and_suffixed() {
    let long = format!("app.{}", "x".repeat(61));
    assert_eq!(long.len(), 65);
    let names = ModelNames::new([long.as_str()]);
    let model = names.to_model(&long).unwrap();
    assert_eq!(model.len(), 64);
    assert_eq!(
        model,
        format!("app_{}_{}", "x".repeat(51), expected_suffix(&long))
    );
    assert_well_formed(&names, &[&long]);

    // A safe name of exactly 64 characters is kept; one of 65 is not.
    let max = "y".repeat(64);
    let over = "y".repeat(65);
    let names = ModelNames::new([max.as_str(), over.as_str()]);
    assert_eq!(names.to_model(&max), Some(max.as_str()));
    let cut = names.to_model(&over).unwrap();
    assert_eq!(
        cut,
        format!("{}_{}", "y".repeat(55), expected_suffix(&over))
    );
    assert_well_formed(&names, &[&max, &over]);
}

#[test]
fn names_that_sanitise_alike_get_distinct_suffixes() {
    let originals = ["shop.list", "shop:list", "shop/list"];
    let names = ModelNames::new(originals);
    for original in originals {
        assert_eq!(
            names.to_model(original).unwrap(),
            format!("shop_list_{}", expected_suffix(original))
        );
    }
    assert_well_formed(&names, &originals);

    // An already-safe name keeps its name; the dotted one moves aside.
    let names = ModelNames::new(["shop_list", "shop.list"]);
    assert_eq!(names.to_model("shop_list"), Some("shop_list"));
    assert_eq!(
        names.to_model("shop.list").unwrap(),
        format!("shop_list_{}", expected_suffix("shop.list"))
    );
}

#[test]
fn a_suffixed_name_never_takes_an_existing_safe_name() {
    // A safe name that happens to equal the suffixed form of a dotted name it clashes with.
    let dotted = "a.b";
    let squatter = format!("a_b_{}", expected_suffix(dotted));
    let originals = [dotted, "a_b", squatter.as_str()];
    let names = ModelNames::new(originals);
    assert_eq!(names.to_model(&squatter), Some(squatter.as_str()));
    assert_ne!(names.to_model(dotted), Some(squatter.as_str()));
    assert_well_formed(&names, &originals);
}

#[test]
fn empty_names_still_get_a_safe_name() {
    let names = ModelNames::new([""]);
    let model = names.to_model("").unwrap();
    assert_eq!(model, format!("tool_{}", expected_suffix("")));
    assert_eq!(names.from_model(model), Some(""));
}

#[test]
fn the_map_is_independent_of_insertion_order() {
    let mut originals: Vec<String> = (0..60)
        .map(|i| match i % 4 {
            0 => format!("app{}.tool", i / 4),
            1 => format!("app{}:tool", i / 4),
            2 => format!("app{}_tool", i / 4),
            _ => format!("{}.{}", "n".repeat(40), "m".repeat(20 + i)),
        })
        .collect();
    let forward = ModelNames::new(&originals);
    originals.reverse();
    let backward = ModelNames::new(&originals);
    originals.rotate_left(17);
    let rotated = ModelNames::new(originals.iter().chain(originals.iter()));
    assert_eq!(forward, backward);
    assert_eq!(forward, rotated);
    assert_eq!(forward.pairs(), backward.pairs());
    let refs: Vec<&str> = originals.iter().map(String::as_str).collect();
    assert_well_formed(&forward, &refs);
    assert_eq!(forward.pairs().len(), 60);
    assert!(forward.pairs().windows(2).all(|w| w[0].0 < w[1].0));
}

#[test]
fn no_names_make_an_empty_map() {
    assert!(ModelNames::new(Vec::<String>::new()).is_empty());
}
