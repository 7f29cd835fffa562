//! What the npm registry and PyPI say about a package: its exact versions, the version to
//! install, its integrity hash and (npm) its programs. A version that does not exist is an
//! error naming the newest one.

use std::collections::BTreeMap;

use serde::Deserialize;

use crate::error::InstallError;
use crate::fetch::Http;

/// One npm version, resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct NpmVersion {
    pub(crate) version: String,
    pub(crate) integrity: Option<String>,
    /// Program names to their files.
    pub(crate) bins: BTreeMap<String, String>,
}

#[derive(Debug, Deserialize)]
struct NpmDocument {
    #[serde(rename = "dist-tags", default)]
    dist_tags: BTreeMap<String, String>,
    #[serde(default)]
    versions: BTreeMap<String, NpmManifest>,
}

#[derive(Debug, Deserialize)]
struct NpmManifest {
    #[serde(default)]
    bin: Option<serde_json::Value>,
    #[serde(default)]
    dist: Option<NpmDist>,
}

#[derive(Debug, Deserialize)]
struct NpmDist {
    #[serde(default)]
    integrity: Option<String>,
}

/// The package's name as a path segment of the registry (`@scope%2fname`).
fn npm_path(name: &str) -> String {
    name.replace('/', "%2f")
}

/// Looks `name` up in the npm registry at `registry` and resolves `version` (the `latest`
/// tag's when absent).
pub(crate) async fn npm_resolve(
    http: &Http,
    registry: &str,
    name: &str,
    version: Option<&str>,
) -> Result<NpmVersion, InstallError> {
    let url = format!("{}/{}", registry.trim_end_matches('/'), npm_path(name));
    // The abbreviated document: versions with their programs and hashes, without readmes.
    let accept = "application/vnd.npm.install-v1+json; q=1.0, application/json; q=0.8";
    let document: NpmDocument = http
        .document(&url, accept, || InstallError::NotFound {
            what: format!("npm package {name}"),
            registry: registry.to_owned(),
            hint: String::new(),
        })
        .await?;
    let latest = document.dist_tags.get("latest").cloned();
    let Some(wanted) = version.map(str::to_owned).or_else(|| latest.clone()) else {
        return Err(InstallError::NotFound {
            what: format!("a latest version of npm package {name}"),
            registry: registry.to_owned(),
            hint: String::new(),
        });
    };
    let Some(manifest) = document.versions.get(&wanted) else {
        return Err(InstallError::NotFound {
            what: format!("version {wanted} of npm package {name}"),
            registry: registry.to_owned(),
            hint: latest
                .map(|l| format!("; the latest version is {l}"))
                .unwrap_or_default(),
        });
    };
    let bins = match &manifest.bin {
        Some(serde_json::Value::String(file)) => {
            let short = name.rsplit('/').next().unwrap_or(name).to_owned();
            BTreeMap::from([(short, file.clone())])
        }
        Some(serde_json::Value::Object(map)) => map
            .iter()
            .filter_map(|(k, v)| v.as_str().map(|v| (k.clone(), v.to_owned())))
            .collect(),
        _ => BTreeMap::new(),
    };
    Ok(NpmVersion {
        version: wanted,
        integrity: manifest.dist.as_ref().and_then(|d| d.integrity.clone()),
        bins,
    })
}

/// The program of an npm package to run: the only one, else the one named like the package.
pub(crate) fn npm_bin(name: &str, bins: &BTreeMap<String, String>) -> Result<String, InstallError> {
    let short = name.rsplit('/').next().unwrap_or(name);
    if bins.len() == 1 {
        return Ok(bins.keys().next().cloned().unwrap_or_default());
    }
    if bins.contains_key(short) {
        return Ok(short.to_owned());
    }
    if bins.is_empty() {
        return Err(InstallError::Unsupported(format!(
            "npm package {name} has no program (`bin`) to run"
        )));
    }
    Err(InstallError::Unsupported(format!(
        "npm package {name} has several programs ({}); none is named like the package",
        bins.keys().cloned().collect::<Vec<_>>().join(", ")
    )))
}

/// One PyPI release, resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PypiVersion {
    pub(crate) version: String,
    pub(crate) integrity: Option<String>,
}

#[derive(Debug, Deserialize)]
struct PypiDocument {
    info: PypiInfo,
    #[serde(default)]
    releases: BTreeMap<String, Vec<PypiFile>>,
}

#[derive(Debug, Deserialize)]
struct PypiInfo {
    version: String,
}

#[derive(Debug, Deserialize)]
struct PypiFile {
    filename: String,
    packagetype: String,
    #[serde(default)]
    digests: BTreeMap<String, String>,
    #[serde(default)]
    yanked: bool,
}

/// Looks `name` up on PyPI (its JSON API at `base`) and resolves `version` (the newest
/// release when absent). The project's document lists every release with its files, so one
/// request answers for any version.
pub(crate) async fn pypi_resolve(
    http: &Http,
    base: &str,
    name: &str,
    version: Option<&str>,
) -> Result<PypiVersion, InstallError> {
    let base = base.trim_end_matches('/');
    let url = format!("{base}/pypi/{name}/json");
    let document: PypiDocument = http
        .document(&url, "application/json", || InstallError::NotFound {
            what: format!("PyPI project {name}"),
            registry: base.to_owned(),
            hint: String::new(),
        })
        .await?;
    let latest = document.info.version;
    let wanted = version.map_or_else(|| latest.clone(), str::to_owned);
    let files: Vec<&PypiFile> = document
        .releases
        .get(&wanted)
        .map(|files| files.iter().filter(|f| !f.yanked).collect())
        .unwrap_or_default();
    if files.is_empty() {
        return Err(InstallError::NotFound {
            what: format!("an installable version {wanted} of PyPI project {name}"),
            registry: base.to_owned(),
            hint: format!("; the latest version is {latest}"),
        });
    }
    // The file pip picks on most machines: a pure-Python wheel, else the source archive.
    let file = files
        .iter()
        .find(|f| f.packagetype == "bdist_wheel" && f.filename.ends_with("-none-any.whl"))
        .or_else(|| files.iter().find(|f| f.packagetype == "sdist"));
    Ok(PypiVersion {
        version: wanted,
        integrity: file
            .and_then(|f| f.digests.get("sha256"))
            .map(|h| format!("sha256-{h}")),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_program_is_the_only_one_or_the_one_named_like_the_package() {
        let one = BTreeMap::from([(
            "mcp-server-everything".to_owned(),
            "dist/index.js".to_owned(),
        )]);
        assert_eq!(
            npm_bin("@modelcontextprotocol/server-everything", &one).unwrap(),
            "mcp-server-everything"
        );
        let two = BTreeMap::from([
            ("tool".to_owned(), "a.js".to_owned()),
            ("x".to_owned(), "b.js".to_owned()),
        ]);
        assert_eq!(npm_bin("@s/x", &two).unwrap(), "x");
        assert!(
            npm_bin("@s/y", &two)
                .unwrap_err()
                .to_string()
                .contains("several programs")
        );
        assert!(npm_bin("z", &BTreeMap::new()).is_err());
    }
}
