//! The server's limits on a request, which the builder's defaults and the path check share
//! (re-exported by module [`builder`](crate::builder)).

/// The server's default packet limit (`jute.maxbuffer`, 0xfffff bytes): it closes the
/// connection of a client that sends a longer request.
pub const SERVER_MAX_PACKET_LEN: usize = 0xfffff;
/// Largest request sent by default (see
/// [`CuratorFrameworkBuilder::max_request_len`](crate::CuratorFrameworkBuilder::max_request_len)):
/// the server's default packet limit less 1 KiB. A request is measured by the bytes of its paths
/// (namespace included), data, and ACL schemes and ids, plus an allowance for the fixed-size
/// fields of each operation and ACL entry; the 1 KiB margin covers the request header and
/// whatever that measure misses, so that a request under this limit is never one the server
/// refuses.
pub const DEFAULT_MAX_REQUEST_LEN: usize = SERVER_MAX_PACKET_LEN - 1024;
