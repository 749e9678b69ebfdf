//! IP addresses and CIDRs as kube validates them: the lenient parse its
//! older fields accept (IPv4 octets with leading zeros), the strict parse
//! new fields require, and the canonical form (`2001:db8::1`, `10.0.0.0/8`)
//! fields such as an IPAddress's name or a ServiceCIDR's `cidrs` must be in.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// What kube says of a value that is no IP address at all.
const NOT_AN_IP: &str = "must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)";
/// What kube says of a value that is no CIDR at all.
const NOT_A_CIDR: &str = "must be a valid CIDR value, (e.g. 10.9.8.0/24 or 2001:db8::/64)";

/// An IPv4 address whose octets may carry leading zeros (`010.0.0.1`), as
/// kube's lenient parser reads it.
fn lenient_ipv4(s: &str) -> Option<Ipv4Addr> {
    let mut octets = [0u8; 4];
    let mut parts = s.split('.');
    for octet in &mut octets {
        let part = parts.next()?;
        if part.is_empty() || part.len() > 8 || !part.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        *octet = part
            .parse::<u32>()
            .ok()
            .and_then(|n| u8::try_from(n).ok())?;
    }
    parts.next().is_none().then_some(Ipv4Addr::from(octets))
}

/// An address as kube's lenient parser (`ParseIPSloppy`) reads it.
pub fn parse_lenient(s: &str) -> Option<IpAddr> {
    if !s.contains(':') {
        return lenient_ipv4(s).map(IpAddr::V4);
    }
    if let Ok(v6) = s.parse::<Ipv6Addr>() {
        return Some(IpAddr::V6(v6));
    }
    // An embedded IPv4 part may have leading zeros too.
    let (head, tail) = s.rsplit_once(':')?;
    let v4 = lenient_ipv4(tail)?;
    format!("{head}:{v4}").parse().ok().map(IpAddr::V6)
}

/// An address written strictly (no leading zeros): what Go's `netip` accepts.
fn parse_strict(s: &str) -> Option<IpAddr> {
    s.parse().ok()
}

/// Whether an address is an IPv4-mapped IPv6 address (`::ffff:1.2.3.4`).
fn is_mapped(ip: IpAddr) -> bool {
    matches!(ip, IpAddr::V6(v6) if v6.to_ipv4_mapped().is_some())
}

/// The problems with an IP address in a field validated strictly (kube's
/// `IsValidIP`): unparseable, leading zeros, IPv4-mapped, not canonical.
pub fn valid_ip(value: &str) -> Vec<String> {
    let Some(ip) = parse_lenient(value) else {
        return vec![NOT_AN_IP.into()];
    };
    let mut problems = Vec::new();
    match parse_strict(value) {
        None => problems.push("must not have leading 0s".to_string()),
        Some(strict) if is_mapped(strict) => {
            problems.push("must not be an IPv4-mapped IPv6 address".to_string())
        }
        Some(_) => {}
    }
    if problems.is_empty() && value != ip.to_string() {
        problems.push(format!("must be in canonical form (\"{ip}\")"));
    }
    problems
}

/// A CIDR (`10.0.0.0/8`) parsed: the address, masked, and the prefix length.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cidr {
    /// The network address (bits beyond the prefix cleared).
    pub network: IpAddr,
    /// The prefix length.
    pub prefix: u8,
    /// Whether the address as written had bits set beyond the prefix.
    pub host_bits: bool,
}

impl Cidr {
    /// Whether this is an IPv6 network (IPv4-mapped ones count as IPv4, as kube counts them).
    pub fn is_ipv6(&self) -> bool {
        matches!(self.network, IpAddr::V6(_)) && !is_mapped(self.network)
    }
}

impl std::fmt::Display for Cidr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.network, self.prefix)
    }
}

/// Clears the bits of `ip` beyond `prefix`.
fn masked(ip: IpAddr, prefix: u8) -> IpAddr {
    match ip {
        IpAddr::V4(v4) => {
            let mask = u32::MAX.checked_shl(32 - u32::from(prefix)).unwrap_or(0);
            IpAddr::V4(Ipv4Addr::from(u32::from(v4) & mask))
        }
        IpAddr::V6(v6) => {
            let mask = u128::MAX.checked_shl(128 - u32::from(prefix)).unwrap_or(0);
            IpAddr::V6(Ipv6Addr::from(u128::from(v6) & mask))
        }
    }
}

/// A CIDR as kube's lenient parser (`ParseCIDRSloppy`) reads it.
pub fn parse_cidr_lenient(s: &str) -> Option<Cidr> {
    let (addr, prefix) = s.split_once('/')?;
    if prefix.is_empty() || prefix.len() > 8 || !prefix.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let ip = parse_lenient(addr)?;
    let prefix: u8 = prefix.parse().ok()?;
    let bits = if ip.is_ipv4() { 32 } else { 128 };
    if prefix > bits {
        return None;
    }
    let network = masked(ip, prefix);
    Some(Cidr {
        network,
        prefix,
        host_bits: network != ip,
    })
}

/// The problems with a CIDR in a field validated strictly (kube's
/// `IsValidCIDR`): unparseable, leading zeros, IPv4-mapped, bits beyond the
/// prefix, not canonical.
pub fn valid_cidr(value: &str) -> Vec<String> {
    let Some(cidr) = parse_cidr_lenient(value) else {
        return vec![NOT_A_CIDR.into()];
    };
    let strict = value.split_once('/').and_then(|(addr, prefix)| {
        let prefix_ok = prefix == "0" || !prefix.starts_with('0');
        parse_strict(addr).filter(|_| prefix_ok)
    });
    let problem = match strict {
        None => Some("must not have leading 0s in IP or prefix length"),
        Some(ip) if is_mapped(ip) => Some("must not have an IPv4-mapped IPv6 address"),
        Some(_) if cidr.host_bits => Some("must not have bits set beyond the prefix length"),
        Some(_) => None,
    };
    if let Some(problem) = problem {
        return vec![problem.into()];
    }
    if value != cidr.to_string() {
        return vec![format!("must be in canonical form (\"{cidr}\")")];
    }
    Vec::new()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses() {
        assert!(valid_ip("10.0.0.1").is_empty());
        assert!(valid_ip("2001:db8::1").is_empty());
        assert_eq!(valid_ip("010.0.0.1"), ["must not have leading 0s"]);
        assert_eq!(
            valid_ip("::ffff:1.2.3.4"),
            ["must not be an IPv4-mapped IPv6 address"]
        );
        assert_eq!(
            valid_ip("2001:DB8:0:0::1"),
            ["must be in canonical form (\"2001:db8::1\")"]
        );
        assert_eq!(valid_ip("10.0.0"), [NOT_AN_IP]);
        assert_eq!(valid_ip("fe80::1%eth0"), [NOT_AN_IP]);
    }

    #[test]
    fn cidrs() {
        assert!(valid_cidr("10.96.0.0/16").is_empty());
        assert!(valid_cidr("2001:db8::/64").is_empty());
        assert_eq!(valid_cidr("10.96.0.0"), [NOT_A_CIDR]);
        assert_eq!(valid_cidr("10.96.0.0/33"), [NOT_A_CIDR]);
        assert_eq!(
            valid_cidr("10.96.0.1/16"),
            ["must not have bits set beyond the prefix length"]
        );
        assert_eq!(
            valid_cidr("010.96.0.0/16"),
            ["must not have leading 0s in IP or prefix length"]
        );
        assert_eq!(
            valid_cidr("10.96.0.0/016"),
            ["must not have leading 0s in IP or prefix length"]
        );
        assert_eq!(
            valid_cidr("2001:DB8::/64"),
            ["must be in canonical form (\"2001:db8::/64\")"]
        );
        assert!(parse_cidr_lenient("2001:db8::/64").is_some_and(|c| c.is_ipv6()));
        assert!(parse_cidr_lenient("10.0.0.0/8").is_some_and(|c| !c.is_ipv6()));
    }
}
