//! What `install SOURCE` may name, and how the text is told apart: `npm:` and `pypi:`
//! packages, `server.json` documents and MCPB bundles (files or URLs), MCP Registry names, and
//! remote Streamable HTTP endpoints.

use std::fmt;
use std::path::{Path, PathBuf};

use url::Url;

use crate::error::InstallError;

/// A parsed install source.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Source {
    /// `npm:PACKAGE[@VERSION]`: without a version, the `latest` tag's.
    Npm {
        /// The package (`@scope/name` or `name`).
        name: String,
        /// The exact version asked for.
        version: Option<String>,
    },
    /// `pypi:PACKAGE[==VERSION]`: without a version, the newest release.
    Pypi {
        /// The project.
        name: String,
        /// The exact version asked for.
        version: Option<String>,
    },
    /// A `server.json` file.
    ServerJsonFile(PathBuf),
    /// A `server.json` URL (its path ends in `.json`).
    ServerJsonUrl(Url),
    /// An `.mcpb` bundle file.
    BundleFile(PathBuf),
    /// An `.mcpb` bundle URL (its path ends in `.mcpb`).
    BundleUrl(Url),
    /// A server name in a configured MCP Registry (`io.github.owner/name[@VERSION]`).
    Registry {
        /// The server's name.
        name: String,
        /// The exact version asked for; the latest without.
        version: Option<String>,
    },
    /// A remote Streamable HTTP endpoint (any other `https://` URL).
    Remote(Url),
}

impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Npm { name, version } => match version {
                Some(v) => write!(f, "npm:{name}@{v}"),
                None => write!(f, "npm:{name}"),
            },
            Self::Pypi { name, version } => match version {
                Some(v) => write!(f, "pypi:{name}=={v}"),
                None => write!(f, "pypi:{name}"),
            },
            Self::ServerJsonFile(path) | Self::BundleFile(path) => {
                write!(f, "{}", path.display())
            }
            Self::ServerJsonUrl(url) | Self::BundleUrl(url) | Self::Remote(url) => {
                write!(f, "{url}")
            }
            Self::Registry { name, version } => match version {
                Some(v) => write!(f, "{name}@{v}"),
                None => write!(f, "{name}"),
            },
        }
    }
}

impl Source {
    /// Reads a SOURCE argument; relative file paths resolve against `cwd`.
    ///
    /// # Errors
    /// [`InstallError::BadSource`] saying which forms are accepted.
    pub fn parse(text: &str, cwd: &Path) -> Result<Self, InstallError> {
        let bad = |reason: &str| InstallError::BadSource {
            source_text: text.to_owned(),
            reason: reason.to_owned(),
        };
        let text = text.trim();
        if let Some(rest) = text.strip_prefix("npm:") {
            let (name, version) = split_npm(rest);
            if !is_npm_name(name) {
                return Err(bad("not an npm package name (`npm:@scope/name[@1.2.3]`)"));
            }
            return Ok(Self::Npm {
                name: name.to_owned(),
                version: version
                    .map(|v| exact_version(v).map_err(|r| bad(&r)))
                    .transpose()?,
            });
        }
        if let Some(rest) = text.strip_prefix("pypi:") {
            let (name, version) = match rest.split_once("==") {
                Some((n, v)) => (n.trim(), Some(v.trim())),
                None => (rest.trim(), None),
            };
            if !is_pypi_name(name) {
                return Err(bad("not a PyPI project name (`pypi:name[==1.2.3]`)"));
            }
            return Ok(Self::Pypi {
                name: name.to_owned(),
                version: version
                    .map(|v| exact_version(v).map_err(|r| bad(&r)))
                    .transpose()?,
            });
        }
        if text.starts_with("http://") || text.starts_with("https://") {
            let url = Url::parse(text).map_err(|e| bad(&format!("not a URL: {e}")))?;
            check_url(&url).map_err(|r| bad(&r))?;
            let path = url.path().to_ascii_lowercase();
            return Ok(if path.ends_with(".mcpb") {
                Self::BundleUrl(url)
            } else if path.ends_with(".json") {
                Self::ServerJsonUrl(url)
            } else {
                Self::Remote(url)
            });
        }
        let path = cwd.join(text);
        if path.is_file() {
            return Ok(if is_bundle_file(&path) {
                Self::BundleFile(path)
            } else {
                Self::ServerJsonFile(path)
            });
        }
        let lower = text.to_ascii_lowercase();
        if lower.ends_with(".json") || lower.ends_with(".mcpb") || text.starts_with(['.', '/']) {
            return Err(bad(&format!("no such file: {}", path.display())));
        }
        let (name, version) = match text.rsplit_once('@') {
            Some((n, v)) => (n, Some(v)),
            None => (text, None),
        };
        if is_registry_name(name) {
            return Ok(Self::Registry {
                name: name.to_owned(),
                version: version
                    .map(|v| exact_version(v).map_err(|r| bad(&r)))
                    .transpose()?,
            });
        }
        Err(bad(
            "expected npm:PACKAGE[@VERSION], pypi:PACKAGE[==VERSION], a server.json or .mcpb file, an https:// URL (a .json document, a .mcpb bundle or a remote MCP endpoint), or a registry name such as io.github.owner/server",
        ))
    }

    /// The kind recorded in the manifest's `install.source`.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Npm { .. } => "npm",
            Self::Pypi { .. } => "pypi",
            Self::ServerJsonFile(_) | Self::ServerJsonUrl(_) => "server.json",
            Self::BundleFile(_) | Self::BundleUrl(_) => "mcpb",
            Self::Registry { .. } => "registry",
            Self::Remote(_) => "remote",
        }
    }
}

/// `@scope/name@1.0` → (`@scope/name`, `1.0`).
fn split_npm(text: &str) -> (&str, Option<&str>) {
    let text = text.trim();
    match text.get(1..).and_then(|rest| rest.rfind('@')) {
        Some(at) => (&text[..=at], Some(&text[at + 2..])),
        None => (text, None),
    }
}

fn is_npm_name(name: &str) -> bool {
    let plain = |part: &str| {
        !part.is_empty()
            && part.len() <= 214
            && !part.starts_with(['.', '_'])
            && part.bytes().all(|b| {
                b.is_ascii_lowercase()
                    || b.is_ascii_digit()
                    || matches!(b, b'-' | b'.' | b'_' | b'~')
            })
    };
    match name.strip_prefix('@') {
        Some(scoped) => scoped
            .split_once('/')
            .is_some_and(|(scope, pkg)| plain(scope) && plain(pkg)),
        None => plain(name),
    }
}

fn is_pypi_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 200
        && name.starts_with(|c: char| c.is_ascii_alphanumeric())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_'))
}

/// `io.github.owner/name`: reverse-DNS, exactly one `/` (the registry's pattern).
pub(crate) fn is_registry_name(name: &str) -> bool {
    let Some((namespace, server)) = name.split_once('/') else {
        return false;
    };
    (3..=200).contains(&name.len())
        && !namespace.is_empty()
        && !server.is_empty()
        && namespace
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-'))
        && server
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
}

/// A version must be exact: no ranges, wildcards or tags other than an exact string.
pub(crate) fn exact_version(version: &str) -> Result<String, String> {
    let version = version.trim();
    let ok = !version.is_empty()
        && version.len() <= 64
        && version != "latest"
        && version.starts_with(|c: char| c.is_ascii_digit())
        && version
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b'+' | b'!'));
    if ok {
        Ok(version.to_owned())
    } else {
        Err(format!(
            "'{version}' is not an exact version (such as 1.2.3); ranges, wildcards and tags are refused so that installs are pinned"
        ))
    }
}

/// Downloads must be https, except from this machine (tests, local mirrors).
pub(crate) fn check_url(url: &Url) -> Result<(), String> {
    match url.scheme() {
        "https" => Ok(()),
        "http" if is_loopback(url) => Ok(()),
        "http" => Err("plain http is allowed only for loopback addresses; use https".to_owned()),
        other => Err(format!("the scheme '{other}' is not supported; use https")),
    }
}

fn is_loopback(url: &Url) -> bool {
    match url.host() {
        Some(url::Host::Domain(d)) => d.eq_ignore_ascii_case("localhost"),
        Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
        Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
        None => false,
    }
}

/// A ZIP file (by its first bytes) or a `.mcpb` name.
fn is_bundle_file(path: &Path) -> bool {
    if path
        .extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("mcpb"))
    {
        return true;
    }
    let mut magic = [0u8; 4];
    std::fs::File::open(path)
        .and_then(|mut f| std::io::Read::read_exact(&mut f, &mut magic))
        .is_ok_and(|()| magic == *b"PK\x03\x04")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Source, String> {
        Source::parse(text, Path::new("/nonexistent")).map_err(|e| e.to_string())
    }

    #[test]
    fn packages_names_and_urls_are_told_apart() {
        assert_eq!(
            parse("npm:@modelcontextprotocol/server-everything@2026.8.31").unwrap(),
            Source::Npm {
                name: "@modelcontextprotocol/server-everything".into(),
                version: Some("2026.8.31".into())
            }
        );
        assert_eq!(
            parse("npm:left-pad").unwrap(),
            Source::Npm {
                name: "left-pad".into(),
                version: None
            }
        );
        assert_eq!(
            parse("pypi:mcp-server-time==2026.10.19").unwrap(),
            Source::Pypi {
                name: "mcp-server-time".into(),
                version: Some("2026.10.19".into())
            }
        );
        assert_eq!(
            parse("io.github.acme/weather@1.0.0").unwrap(),
            Source::Registry {
                name: "io.github.acme/weather".into(),
                version: Some("1.0.0".into())
            }
        );
        assert!(matches!(
            parse("https://example.com/x/server.json"),
            Ok(Source::ServerJsonUrl(_))
        ));
        assert!(matches!(
            parse("https://example.com/x/app.mcpb"),
            Ok(Source::BundleUrl(_))
        ));
        assert!(matches!(
            parse("https://mcp.example.com/mcp"),
            Ok(Source::Remote(_))
        ));
        assert!(matches!(
            parse("http://127.0.0.1:9/mcp"),
            Ok(Source::Remote(_))
        ));
    }

    #[test]
    fn ranges_plain_http_and_unknown_forms_are_refused() {
        assert!(
            parse("npm:x@^1.0.0")
                .unwrap_err()
                .contains("not an exact version")
        );
        assert!(
            parse("npm:x@latest")
                .unwrap_err()
                .contains("not an exact version")
        );
        assert!(parse("pypi:x==*").is_err());
        assert!(
            parse("http://example.com/mcp")
                .unwrap_err()
                .contains("loopback")
        );
        assert!(parse("ftp://example.com/x").is_err());
        assert!(parse("npm:Bad Name").is_err());
        assert!(
            parse("./missing.json")
                .unwrap_err()
                .contains("no such file")
        );
        assert!(parse("just-a-word").unwrap_err().contains("expected npm:"));
    }
}
