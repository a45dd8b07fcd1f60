//! The host's addresses, picked as Curator's `ServiceInstanceBuilder.getAllLocalIPs` picks them.

use std::net::Ipv4Addr;

/// The host's IPv4 addresses that Curator's default filter accepts, in the order Java lists
/// them; [`ServiceInstanceBuilder`](crate::ServiceInstanceBuilder) takes the first as the
/// instance's default address.
///
/// Curator (`ServiceInstanceBuilder.getAllLocalIPs`) walks `NetworkInterface.getNetworkInterfaces()`
/// and keeps each address that is not loopback and, unless the interface is point to point, not
/// link-local. Java lists interfaces, and the addresses of each, in the reverse of the order the
/// kernel reports them (OpenJDK's Linux `NetworkInterface.c` prepends both), so this reads
/// `getifaddrs(3)` and reverses both orders in the same way. Alias labels (`eth0:1`) count as
/// their interface, as in Java.
///
/// Unlike Curator, only IPv4 addresses are kept: Java lists an interface's IPv6 addresses first,
/// so Curator's default is often an IPv6 address with a scope suffix (`fd00:0:0:0:0:0:0:2%eth0`),
/// which other clients cannot put in a URI as `{address}:{port}`. This is what Curator picks when
/// Java runs with `-Djava.net.preferIPv4Stack=true`.
///
/// `curator_core::local_address` is not used: it resolves the host name, which on Debian
/// commonly gives the loopback address `127.0.1.1` that Curator's filter rejects.
///
/// Empty when the addresses cannot be read or none passes the filter.
pub fn local_ipv4_addresses() -> Vec<Ipv4Addr> {
    // (interface, point to point, addresses), interfaces in the order first seen.
    let mut interfaces: Vec<(String, bool, Vec<Ipv4Addr>)> = Vec::new();
    for (name, point_to_point, address) in ipv4_interface_addresses() {
        let base = name.split(':').next().unwrap_or_default().to_string();
        match interfaces.iter_mut().find(|(n, _, _)| *n == base) {
            Some((_, p2p, addresses)) => {
                *p2p |= point_to_point;
                addresses.push(address);
            }
            None => interfaces.push((base, point_to_point, vec![address])),
        }
    }
    interfaces
        .into_iter()
        .rev()
        .flat_map(|(_, point_to_point, addresses)| {
            addresses.into_iter().rev().filter(move |a| curator_filter(*a, point_to_point))
        })
        .collect()
}

/// Curator's default `LocalIpFilter`: not loopback, and not link-local unless the interface is
/// point to point.
fn curator_filter(address: Ipv4Addr, point_to_point: bool) -> bool {
    !address.is_loopback() && (point_to_point || !address.is_link_local())
}

/// Every IPv4 address of every interface, as `getifaddrs(3)` reports them: (interface name,
/// point to point, address).
fn ipv4_interface_addresses() -> Vec<(String, bool, Ipv4Addr)> {
    let mut found = Vec::new();
    let mut head: *mut libc::ifaddrs = std::ptr::null_mut();
    // SAFETY: getifaddrs fills `head` with a list we own until freeifaddrs; on failure it
    // returns -1 and we read nothing.
    if unsafe { libc::getifaddrs(&mut head) } != 0 {
        return found;
    }
    let mut cursor = head;
    while !cursor.is_null() {
        // SAFETY: `cursor` is a node of the list getifaddrs returned, not yet freed.
        let entry = unsafe { &*cursor };
        cursor = entry.ifa_next;
        if entry.ifa_addr.is_null() || entry.ifa_name.is_null() {
            continue;
        }
        // SAFETY: ifa_addr is non-null and points to a sockaddr whose family we check before
        // reading it as a sockaddr_in.
        let family = unsafe { (*entry.ifa_addr).sa_family };
        if i32::from(family) != libc::AF_INET {
            continue;
        }
        // SAFETY: the family is AF_INET, so the address is a sockaddr_in; read unaligned, as a
        // sockaddr pointer promises less alignment than a sockaddr_in needs.
        let sin = unsafe { std::ptr::read_unaligned(entry.ifa_addr as *const libc::sockaddr_in) };
        let address = Ipv4Addr::from(u32::from_be(sin.sin_addr.s_addr));
        // SAFETY: ifa_name is a non-null NUL-terminated string owned by the list.
        let name = unsafe { std::ffi::CStr::from_ptr(entry.ifa_name) }.to_string_lossy().into_owned();
        let point_to_point = entry.ifa_flags & (libc::IFF_POINTOPOINT as libc::c_uint) != 0;
        found.push((name, point_to_point, address));
    }
    // SAFETY: `head` came from a successful getifaddrs and is freed once.
    unsafe { libc::freeifaddrs(head) };
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Follows Curator's `TestLocalIpFilter.testFilterEverything` (its second half: the default
    /// filter finds addresses): the host has a non-loopback IPv4 address, and loopback and
    /// link-local addresses are never returned.
    #[test]
    fn finds_the_hosts_addresses_without_loopback_or_link_local() {
        let addresses = local_ipv4_addresses();
        assert!(!addresses.is_empty(), "this host has a non-loopback IPv4 address");
        assert!(addresses.iter().all(|a| !a.is_loopback() && !a.is_link_local()), "{addresses:?}");
    }

    /// Curator's filter: loopback never; link-local only on a point-to-point interface.
    #[test]
    fn the_filter_is_curators() {
        assert!(!curator_filter(Ipv4Addr::new(127, 0, 1, 1), true));
        assert!(!curator_filter(Ipv4Addr::new(169, 254, 1, 2), false));
        assert!(curator_filter(Ipv4Addr::new(169, 254, 1, 2), true));
        assert!(curator_filter(Ipv4Addr::new(10, 0, 0, 1), false));
    }
}
