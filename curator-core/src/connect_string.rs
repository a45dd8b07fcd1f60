//! Connect strings, `[tcp://|tcp+tls://]host[:port][,...][/chroot]`, read in one place: the
//! builder checks them, the ensemble tracker keeps their chroot and compares their servers, and
//! the TLS diagnosis probes their servers. The port defaults to 2181; an IPv6 address goes in
//! brackets; a chroot may follow the last server only (a `/` after a `tcp://` prefix's is the
//! chroot's).

/// The port of an entry that names none.
pub(crate) const DEFAULT_PORT: u16 = 2181;

/// How an entry asks to be reached.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Scheme {
    /// No prefix: as the framework is configured.
    Unsaid,
    /// `tcp://`: plain, whatever the framework's TLS settings.
    Plain,
    /// `tcp+tls://`.
    Tls,
}

/// One server of a connect string.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Server<'a> {
    /// Without the brackets of an IPv6 address.
    pub(crate) host: &'a str,
    pub(crate) port: u16,
    pub(crate) scheme: Scheme,
}

/// A parsed connect string.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ConnectString<'a> {
    pub(crate) servers: Vec<Server<'a>>,
    /// The chroot after the last server (`/app`), if any; not checked as a path here.
    pub(crate) chroot: Option<&'a str>,
}

/// Parses `connect_string`; `Err` says what is wrong with it (the builder reports it).
pub(crate) fn parse(connect_string: &str) -> Result<ConnectString<'_>, String> {
    if connect_string.trim().is_empty() {
        return Err("empty connect string".into());
    }
    let entries: Vec<&str> = connect_string.split(',').collect();
    let mut servers = Vec::with_capacity(entries.len());
    let mut chroot = None;
    for (i, entry) in entries.iter().enumerate() {
        let (scheme, entry) = if let Some(rest) = entry.strip_prefix("tcp://") {
            (Scheme::Plain, rest)
        } else if let Some(rest) = entry.strip_prefix("tcp+tls://") {
            (Scheme::Tls, rest)
        } else {
            (Scheme::Unsaid, *entry)
        };
        let address = match entry.find('/') {
            Some(at) if i + 1 == entries.len() => {
                chroot = Some(&entry[at..]);
                &entry[..at]
            }
            Some(_) => return Err("only the last server may be followed by a chroot".into()),
            None => entry,
        };
        let (host, port) = match address.strip_prefix('[') {
            Some(v6) => {
                let (host, rest) = v6.split_once(']').ok_or("unclosed '[' in an IPv6 address")?;
                match rest {
                    "" => (host, None),
                    _ => (host, Some(rest.strip_prefix(':').ok_or("junk after an IPv6 address")?)),
                }
            }
            None => match address.rsplit_once(':') {
                Some((host, port)) => (host, Some(port)),
                None => (address, None),
            },
        };
        if host.is_empty() {
            return Err("a server has no host".into());
        }
        if host.chars().any(char::is_whitespace) {
            return Err("a host contains white space".into());
        }
        let port = match port.filter(|p| !p.is_empty()) {
            None => DEFAULT_PORT,
            Some(port) => match port.parse::<u16>() {
                Ok(p) if p > 0 => p,
                _ => return Err(format!("port {port:?} is not a number from 1 to 65535")),
            },
        };
        servers.push(Server { host, port, scheme });
    }
    Ok(ConnectString { servers, chroot })
}

/// The servers of `connect_string` as `host:port`, host in lower case, for comparing two
/// connect strings (none if it does not parse).
pub(crate) fn server_set(connect_string: &str) -> std::collections::BTreeSet<String> {
    parse(connect_string)
        .map(|cs| cs.servers.iter().map(|s| format!("{}:{}", s.host.to_ascii_lowercase(), s.port)).collect())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn servers_schemes_ports_and_chroot() {
        let cs = parse("a:1,tcp://b,tcp+tls://[::1]:3/app").unwrap();
        assert_eq!(
            cs.servers,
            vec![
                Server { host: "a", port: 1, scheme: Scheme::Unsaid },
                Server { host: "b", port: DEFAULT_PORT, scheme: Scheme::Plain },
                Server { host: "::1", port: 3, scheme: Scheme::Tls },
            ]
        );
        assert_eq!(cs.chroot, Some("/app"));
        assert_eq!(parse("a:").unwrap().servers[0].port, DEFAULT_PORT);
    }

    #[test]
    fn what_is_wrong_is_said() {
        for (bad, why) in [
            ("  ", "empty"),
            ("a/x,b", "only the last server"),
            ("[::1", "unclosed"),
            ("[::1]x", "junk"),
            (":1", "no host"),
            ("a b:1", "white space"),
            ("a:0", "not a number"),
            ("a:xx", "not a number"),
        ] {
            let err = parse(bad).unwrap_err();
            assert!(err.contains(why), "{bad:?}: {err}");
        }
    }

    #[test]
    fn server_sets_ignore_order_case_scheme_and_chroot() {
        assert_eq!(server_set("a:1,b:2"), server_set("tcp://b:2,A:1/x"));
        assert_ne!(server_set("a:1"), server_set("a:1,b:2"));
    }
}
