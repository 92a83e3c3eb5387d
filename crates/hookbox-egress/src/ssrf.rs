//! SSRF defences: which IP addresses a connection may be dialed to, and how a host string that
//! is an IP literal (in any of the forms `inet_aton` accepts) is read.
//!
//! Owns the blocked-range table (data, one reason per entry), the reading of embedded IPv4
//! addresses in IPv6 forms (mapped, compatible, NAT64, 6to4, Teredo) and the operator's
//! allow-CIDR override. It must not resolve names nor open sockets: `dial` does that, and calls
//! [`AddressGuard::check`] on every resolved address before dialing exactly that address.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::str::FromStr;

/// A CIDR block, IPv4 or IPv6.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cidr {
    addr: IpAddr,
    prefix: u8,
}

/// Why a CIDR string was rejected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid CIDR {input:?}: {why}")]
pub struct CidrError {
    input: String,
    why: &'static str,
}

impl Cidr {
    /// An IPv4 block. `prefix` above 32 is clamped (only used with constants below).
    pub const fn v4(a: u8, b: u8, c: u8, d: u8, prefix: u8) -> Self {
        Self {
            addr: IpAddr::V4(Ipv4Addr::new(a, b, c, d)),
            prefix,
        }
    }

    /// An IPv6 block from its 128-bit value.
    pub const fn v6(bits: u128, prefix: u8) -> Self {
        Self {
            addr: IpAddr::V6(Ipv6Addr::from_bits(bits)),
            prefix,
        }
    }

    /// Whether `ip` lies in this block. An IPv4 block never contains an IPv6 address (callers
    /// unwrap embedded IPv4 first, see [`embedded_ipv4`]).
    pub fn contains(&self, ip: IpAddr) -> bool {
        match (self.addr, ip) {
            (IpAddr::V4(net), IpAddr::V4(ip)) => {
                let mask = u32::MAX
                    .checked_shl(32 - u32::from(self.prefix))
                    .unwrap_or(0);
                net.to_bits() & mask == ip.to_bits() & mask
            }
            (IpAddr::V6(net), IpAddr::V6(ip)) => {
                let mask = u128::MAX
                    .checked_shl(128 - u32::from(self.prefix))
                    .unwrap_or(0);
                net.to_bits() & mask == ip.to_bits() & mask
            }
            (IpAddr::V4(_), IpAddr::V6(_)) | (IpAddr::V6(_), IpAddr::V4(_)) => false,
        }
    }
}

impl FromStr for Cidr {
    type Err = CidrError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let err = |why| CidrError {
            input: s.to_owned(),
            why,
        };
        let (addr, prefix) = match s.split_once('/') {
            Some((a, p)) => (a, Some(p)),
            None => (s, None),
        };
        let addr: IpAddr = addr.parse().map_err(|_| err("not an IP address"))?;
        let max = match addr {
            IpAddr::V4(_) => 32,
            IpAddr::V6(_) => 128,
        };
        let prefix = match prefix {
            Some(p) => p.parse::<u8>().map_err(|_| err("prefix is not a number"))?,
            None => max,
        };
        if prefix > max {
            return Err(err("prefix too long"));
        }
        Ok(Self { addr, prefix })
    }
}

impl fmt::Display for Cidr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.addr, self.prefix)
    }
}

/// One blocked range and why.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlockedRange {
    pub cidr: Cidr,
    /// Short rule name used in denials and audit events.
    pub rule: &'static str,
    pub reason: &'static str,
}

const fn b(cidr: Cidr, rule: &'static str, reason: &'static str) -> BlockedRange {
    BlockedRange { cidr, rule, reason }
}

/// IPv4 ranges no sandbox may reach, whatever the allowlist says.
pub const BLOCKED_V4: &[BlockedRange] = &[
    b(
        Cidr::v4(0, 0, 0, 0, 8),
        "this-network",
        "0.0.0.0/8 means this host on Linux",
    ),
    b(
        Cidr::v4(10, 0, 0, 0, 8),
        "rfc1918",
        "private network (RFC 1918)",
    ),
    b(
        Cidr::v4(100, 64, 0, 0, 10),
        "cgnat",
        "carrier-grade NAT shared space (RFC 6598)",
    ),
    b(
        Cidr::v4(127, 0, 0, 0, 8),
        "loopback",
        "the host's own services",
    ),
    b(
        Cidr::v4(169, 254, 0, 0, 16),
        "link-local",
        "link-local, incl. cloud metadata 169.254.169.254",
    ),
    b(
        Cidr::v4(172, 16, 0, 0, 12),
        "rfc1918",
        "private network (RFC 1918)",
    ),
    b(
        Cidr::v4(192, 0, 0, 0, 24),
        "ietf-protocol",
        "IETF protocol assignments (RFC 6890)",
    ),
    b(
        Cidr::v4(192, 0, 2, 0, 24),
        "documentation",
        "TEST-NET-1 (RFC 5737)",
    ),
    b(
        Cidr::v4(192, 88, 99, 0, 24),
        "6to4-relay",
        "6to4 relay anycast (RFC 7526)",
    ),
    b(
        Cidr::v4(192, 168, 0, 0, 16),
        "rfc1918",
        "private network (RFC 1918)",
    ),
    b(
        Cidr::v4(198, 18, 0, 0, 15),
        "benchmarking",
        "network benchmarking (RFC 2544)",
    ),
    b(
        Cidr::v4(198, 51, 100, 0, 24),
        "documentation",
        "TEST-NET-2 (RFC 5737)",
    ),
    b(
        Cidr::v4(203, 0, 113, 0, 24),
        "documentation",
        "TEST-NET-3 (RFC 5737)",
    ),
    b(Cidr::v4(224, 0, 0, 0, 4), "multicast", "multicast"),
    b(
        Cidr::v4(240, 0, 0, 0, 4),
        "reserved",
        "reserved, incl. broadcast 255.255.255.255",
    ),
];

/// IPv6 ranges no sandbox may reach. Ranges that embed an IPv4 address (mapped, NAT64, 6to4)
/// are not here: their IPv4 part is checked against [`BLOCKED_V4`] instead.
pub const BLOCKED_V6: &[BlockedRange] = &[
    b(Cidr::v6(0, 128), "unspecified", ":: means this host"),
    b(Cidr::v6(1, 128), "loopback", "the host's own services"),
    b(
        Cidr::v6(0, 96),
        "ipv4-compatible",
        "deprecated IPv4-compatible form (RFC 4291)",
    ),
    b(
        Cidr::v6(0x0064_ff9b_0001 << 80, 48),
        "nat64-local",
        "local-use NAT64 (RFC 8215)",
    ),
    b(
        Cidr::v6(0x0100 << 112, 64),
        "discard",
        "discard-only (RFC 6666)",
    ),
    b(
        Cidr::v6(0x2001 << 112, 32),
        "teredo",
        "Teredo tunnels reach arbitrary IPv4 hosts",
    ),
    b(
        Cidr::v6(0x2001 << 112, 23),
        "ietf-protocol",
        "IETF protocol assignments (RFC 6890)",
    ),
    b(
        Cidr::v6(0x2001_0db8 << 96, 32),
        "documentation",
        "documentation (RFC 3849)",
    ),
    b(
        Cidr::v6(0x3fff << 112, 20),
        "documentation",
        "documentation (RFC 9637)",
    ),
    b(
        Cidr::v6(0xfc00 << 112, 7),
        "ula",
        "unique local addresses (RFC 4193)",
    ),
    b(Cidr::v6(0xfe80 << 112, 10), "link-local", "link-local"),
    b(
        Cidr::v6(0xfec0 << 112, 10),
        "site-local",
        "deprecated site-local",
    ),
    b(Cidr::v6(0xff00 << 112, 8), "multicast", "multicast"),
];

/// Anything outside global unicast `2000::/3` that is not an IPv4 embedding handled below.
const NOT_GLOBAL_V6: BlockedRange = b(
    Cidr::v6(0, 0),
    "reserved",
    "outside IPv6 global unicast 2000::/3",
);

/// How an IPv6 address carries an IPv4 address that is then what really gets reached.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Embedding {
    /// `::ffff:a.b.c.d`: the kernel dials the IPv4 address.
    Mapped,
    /// `64:ff9b::a.b.c.d`: a NAT64 gateway dials the IPv4 address.
    Nat64,
    /// `2002:aabb:ccdd::/48`: 6to4 reaches the IPv4 address.
    SixToFour,
}

/// The IPv4 address an IPv6 address stands for, if it is one of the embedding forms.
pub fn embedded_ipv4(ip: Ipv6Addr) -> Option<(Embedding, Ipv4Addr)> {
    let bits = ip.to_bits();
    let low32 = Ipv4Addr::from_bits(bits as u32);
    if bits >> 32 == 0xffff {
        Some((Embedding::Mapped, low32))
    } else if bits >> 32 == 0x0064_ff9b << 64 {
        Some((Embedding::Nat64, low32))
    } else if bits >> 112 == 0x2002 {
        Some((
            Embedding::SixToFour,
            Ipv4Addr::from_bits((bits >> 80) as u32),
        ))
    } else {
        None
    }
}

/// The verdict on one address.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AddressVerdict {
    /// Globally routable and not blocked.
    Public,
    /// In a blocked range, but the operator allowed it (dangerous, tests use it).
    OperatorAllowed(Cidr),
    /// Blocked; `via` names the IPv6 form when the blocked address was embedded.
    Blocked {
        range: BlockedRange,
        via: Option<Embedding>,
    },
}

/// Classifies an address against the blocked tables, after unwrapping embedded IPv4.
pub fn classify(ip: IpAddr) -> Result<(), (BlockedRange, Option<Embedding>)> {
    match ip {
        IpAddr::V4(v4) => classify_v4(v4).map_err(|r| (r, None)),
        IpAddr::V6(v6) => {
            if let Some((how, v4)) = embedded_ipv4(v6) {
                return classify_v4(v4).map_err(|r| (r, Some(how)));
            }
            if let Some(range) = BLOCKED_V6.iter().find(|r| r.cidr.contains(ip)) {
                return Err((*range, None));
            }
            if v6.segments()[0] & 0xe000 != 0x2000 {
                return Err((NOT_GLOBAL_V6, None));
            }
            Ok(())
        }
    }
}

fn classify_v4(ip: Ipv4Addr) -> Result<(), BlockedRange> {
    match BLOCKED_V4.iter().find(|r| r.cidr.contains(IpAddr::V4(ip))) {
        Some(range) => Err(*range),
        None => Ok(()),
    }
}

/// The always-on address check plus the operator's allow-CIDR override.
#[derive(Debug, Clone, Default)]
pub struct AddressGuard {
    /// Operator-only: CIDRs that may be dialed even though they are blocked. Dangerous: an
    /// entry here lets sandboxes reach those hosts (tests use it for loopback receivers).
    allowed: Vec<Cidr>,
}

impl AddressGuard {
    pub fn new(operator_allowed: Vec<Cidr>) -> Self {
        Self {
            allowed: operator_allowed,
        }
    }

    /// The verdict on one resolved address. The operator list is matched against the address
    /// and against its embedded IPv4 address, so `127.0.0.0/8` also admits `::ffff:127.0.0.1`.
    pub fn check(&self, ip: IpAddr) -> AddressVerdict {
        match classify(ip) {
            Ok(()) => AddressVerdict::Public,
            Err((range, via)) => {
                let unwrapped = match ip {
                    IpAddr::V6(v6) => embedded_ipv4(v6).map(|(_, v4)| IpAddr::V4(v4)),
                    IpAddr::V4(_) => None,
                };
                let hit = self
                    .allowed
                    .iter()
                    .find(|c| c.contains(ip) || unwrapped.is_some_and(|u| c.contains(u)));
                match hit {
                    Some(cidr) => AddressVerdict::OperatorAllowed(*cidr),
                    None => AddressVerdict::Blocked { range, via },
                }
            }
        }
    }
}

/// What a host string is, after normalisation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HostKind {
    /// An IP literal in any accepted spelling, normalised.
    Ip(IpAddr),
    /// A DNS name: lower-case, without trailing dot.
    Name(String),
}

/// Why a host string is refused before any lookup.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HostError {
    #[error("empty host")]
    Empty,
    #[error("host {0:?} looks numeric but is not a valid IPv4 address")]
    MalformedNumeric(String),
    #[error("host {0:?} is not a valid IPv6 literal")]
    MalformedIpv6(String),
    #[error("host {0:?} contains characters not allowed in a DNS name")]
    InvalidName(String),
}

/// Reads a host as it appears in a CONNECT line or URL authority (without port): bracketed
/// IPv6, IPv4 in dotted/decimal/octal/hex forms (`127.1`, `2130706433`, `0x7f.1`, `0177.0.0.1`),
/// or a name (case folded, trailing dot removed). A host whose last label is numeric but that
/// is not a valid IPv4 form is refused, as browsers do, so no resolver reads it differently.
pub fn parse_host(host: &str) -> Result<HostKind, HostError> {
    if host.is_empty() {
        return Err(HostError::Empty);
    }
    if let Some(inner) = host.strip_prefix('[') {
        let inner = inner
            .strip_suffix(']')
            .ok_or_else(|| HostError::MalformedIpv6(host.to_owned()))?;
        // Zone ids (`%eth0`) are refused by Ipv6Addr's parser, which is what we want.
        return inner
            .parse::<Ipv6Addr>()
            .map(|ip| HostKind::Ip(IpAddr::V6(ip)))
            .map_err(|_| HostError::MalformedIpv6(host.to_owned()));
    }
    if host.contains(':') {
        return host
            .parse::<Ipv6Addr>()
            .map(|ip| HostKind::Ip(IpAddr::V6(ip)))
            .map_err(|_| HostError::MalformedIpv6(host.to_owned()));
    }
    let name = host.strip_suffix('.').unwrap_or(host).to_ascii_lowercase();
    if name.is_empty() {
        return Err(HostError::Empty);
    }
    if let Some(v4) = parse_inet_aton(&name) {
        return Ok(HostKind::Ip(IpAddr::V4(v4)));
    }
    let last = name.rsplit('.').next().unwrap_or("");
    if looks_numeric(last) {
        return Err(HostError::MalformedNumeric(host.to_owned()));
    }
    let valid = name.split('.').all(|label| {
        !label.is_empty()
            && label.len() <= 63
            && label
                .bytes()
                .all(|c| c.is_ascii_alphanumeric() || c == b'-' || c == b'_')
    });
    if !valid || name.len() > 253 {
        return Err(HostError::InvalidName(host.to_owned()));
    }
    Ok(HostKind::Name(name))
}

fn looks_numeric(label: &str) -> bool {
    if let Some(hex) = label.strip_prefix("0x") {
        hex.bytes().all(|c| c.is_ascii_hexdigit())
    } else {
        !label.is_empty() && label.bytes().all(|c| c.is_ascii_digit())
    }
}

/// One `inet_aton` part: decimal, `0x` hex, or leading-zero octal.
fn parse_part(part: &str) -> Option<u64> {
    if part.is_empty() {
        return None;
    }
    let (digits, radix) = if let Some(hex) = part.strip_prefix("0x") {
        (hex, 16)
    } else if part.len() > 1 && part.starts_with('0') {
        (&part[1..], 8)
    } else {
        (part, 10)
    };
    if digits.is_empty() {
        // "0x" alone is zero for inet_aton.
        return (radix == 16).then_some(0);
    }
    if digits.len() > 12 {
        return None;
    }
    u64::from_str_radix(digits, radix).ok()
}

/// `inet_aton` semantics: 1 to 4 parts, the last one fills the remaining bytes.
fn parse_inet_aton(s: &str) -> Option<Ipv4Addr> {
    let parts: Vec<&str> = s.split('.').collect();
    if parts.is_empty() || parts.len() > 4 {
        return None;
    }
    let mut values = Vec::with_capacity(parts.len());
    for p in &parts {
        values.push(parse_part(p)?);
    }
    let (last, head) = values.split_last()?;
    let mut out: u32 = 0;
    for (i, v) in head.iter().enumerate() {
        if *v > 255 {
            return None;
        }
        out |= (*v as u32) << (24 - 8 * i);
    }
    let room_bits = 32 - 8 * head.len() as u32;
    if room_bits < 64 && *last >= 1u64 << room_bits {
        return None;
    }
    Some(Ipv4Addr::from_bits(out | *last as u32))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn numeric_forms_normalise() {
        for (input, want) in [
            ("127.0.0.1", "127.0.0.1"),
            ("127.1", "127.0.0.1"),
            ("2130706433", "127.0.0.1"),
            ("0x7f000001", "127.0.0.1"),
            ("0x7f.1", "127.0.0.1"),
            ("0177.0.0.1", "127.0.0.1"),
            ("0177.0.0.01", "127.0.0.1"),
            ("017700000001", "127.0.0.1"),
            ("0", "0.0.0.0"),
            ("169.254.43518", "169.254.169.254"),
            ("0xA9FEA9FE", "169.254.169.254"),
            ("10.0x10.1", "10.16.0.1"),
            ("8.8.8.8.", "8.8.8.8"),
            ("[::1]", "::1"),
            ("[::ffff:127.0.0.1]", "::ffff:127.0.0.1"),
        ] {
            assert_eq!(parse_host(input), Ok(HostKind::Ip(ip(want))), "{input}");
        }
    }

    #[test]
    fn malformed_numeric_hosts_are_refused() {
        for input in [
            "256.0.0.1",
            "1.2.3.4.5",
            "4294967296",
            "0x1.0x2.0x3.0x100",
            "09.1",
        ] {
            assert!(
                matches!(parse_host(input), Err(HostError::MalformedNumeric(_))),
                "{input}: {:?}",
                parse_host(input)
            );
        }
        assert!(matches!(
            parse_host("[::1"),
            Err(HostError::MalformedIpv6(_))
        ));
        assert!(matches!(
            parse_host("[fe80::1%eth0]"),
            Err(HostError::MalformedIpv6(_))
        ));
        assert!(matches!(
            parse_host("a b.com"),
            Err(HostError::InvalidName(_))
        ));
        assert!(matches!(parse_host(""), Err(HostError::Empty)));
        assert!(matches!(parse_host("."), Err(HostError::Empty)));
    }

    #[test]
    fn names_are_folded() {
        assert_eq!(
            parse_host("API.Example.COM."),
            Ok(HostKind::Name("api.example.com".into()))
        );
        // A numeric-looking label that is not last is just a name.
        assert_eq!(
            parse_host("1.2.3.example"),
            Ok(HostKind::Name("1.2.3.example".into()))
        );
    }

    #[test]
    fn every_blocked_form_is_blocked() {
        let guard = AddressGuard::default();
        for s in [
            "127.0.0.1",
            "127.255.255.254",
            "0.0.0.0",
            "0.1.2.3",
            "10.1.2.3",
            "172.16.0.1",
            "172.31.255.255",
            "192.168.1.1",
            "100.64.0.1",
            "100.127.255.255",
            "169.254.169.254",
            "169.254.0.1",
            "224.0.0.1",
            "239.255.255.250",
            "240.0.0.1",
            "255.255.255.255",
            "192.0.0.8",
            "192.0.2.1",
            "198.18.0.1",
            "198.51.100.1",
            "203.0.113.1",
            "::",
            "::1",
            "::ffff:127.0.0.1",
            "::ffff:169.254.169.254",
            "::ffff:10.0.0.1",
            "::127.0.0.1",
            "::8.8.8.8",
            "64:ff9b::127.0.0.1",
            "64:ff9b::a9fe:a9fe",
            "64:ff9b:1::1",
            "2002:7f00:0001::1",
            "2002:a9fe:a9fe::",
            "2001:0:4136:e378:8000:63bf:3fff:fdd2",
            "2001:db8::1",
            "fc00::1",
            "fd12:3456::1",
            "fe80::1",
            "fec0::1",
            "ff02::1",
            "100::1",
            "1::1",
            "4000::1",
        ] {
            assert!(
                matches!(guard.check(ip(s)), AddressVerdict::Blocked { .. }),
                "{s} should be blocked"
            );
        }
    }

    #[test]
    fn public_addresses_pass() {
        let guard = AddressGuard::default();
        for s in [
            "8.8.8.8",
            "1.1.1.1",
            "172.32.0.1",
            "100.128.0.1",
            "2606:4700::1111",
            "::ffff:8.8.8.8",
            "64:ff9b::8.8.8.8",
            "2002:0808:0808::1",
        ] {
            assert_eq!(guard.check(ip(s)), AddressVerdict::Public, "{s}");
        }
    }

    #[test]
    fn embedded_blocks_name_their_form() {
        let guard = AddressGuard::default();
        let AddressVerdict::Blocked { range, via } = guard.check(ip("::ffff:127.0.0.1")) else {
            panic!("not blocked")
        };
        assert_eq!((range.rule, via), ("loopback", Some(Embedding::Mapped)));
        let AddressVerdict::Blocked { via, .. } = guard.check(ip("2002:7f00:1::")) else {
            panic!("not blocked")
        };
        assert_eq!(via, Some(Embedding::SixToFour));
    }

    #[test]
    fn operator_cidrs_override_including_mapped_forms() {
        let cidr: Cidr = "127.0.0.0/8".parse().unwrap();
        let guard = AddressGuard::new(vec![cidr]);
        assert_eq!(
            guard.check(ip("127.0.0.1")),
            AddressVerdict::OperatorAllowed(cidr)
        );
        assert_eq!(
            guard.check(ip("::ffff:127.0.0.1")),
            AddressVerdict::OperatorAllowed(cidr)
        );
        assert!(matches!(
            guard.check(ip("::1")),
            AddressVerdict::Blocked { .. }
        ));
        assert!(matches!(
            guard.check(ip("10.0.0.1")),
            AddressVerdict::Blocked { .. }
        ));
    }

    #[test]
    fn cidr_parsing() {
        assert_eq!(
            "10.0.0.0/8".parse::<Cidr>().unwrap().to_string(),
            "10.0.0.0/8"
        );
        assert_eq!("::1".parse::<Cidr>().unwrap().to_string(), "::1/128");
        assert!("10.0.0.0/33".parse::<Cidr>().is_err());
        assert!("nope/8".parse::<Cidr>().is_err());
        assert!("10.0.0.0/x".parse::<Cidr>().is_err());
        let zero: Cidr = "0.0.0.0/0".parse().unwrap();
        assert!(zero.contains(ip("8.8.8.8")));
        assert!(!zero.contains(ip("::1")));
    }
}
