//! The proxy-wasm ABI 0.2.x as plain data: status codes, enum values, the
//! serialised header-map format. Facts from the ABI spec
//! (proxy-wasm/spec, `abi-versions/v0.2.1`); no behaviour here.

/// `proxy_status_t`: what every host function returns.
pub const OK: u32 = 0;
/// The key, property or buffer asked for does not exist.
pub const NOT_FOUND: u32 = 1;
/// An argument is out of range (a map type, a status code, a header name).
pub const BAD_ARGUMENT: u32 = 2;
/// A pointer and length the module passed are outside its memory.
pub const INVALID_MEMORY_ACCESS: u32 = 6;
/// The host does not implement this call.
pub const UNIMPLEMENTED: u32 = 12;

/// `proxy_map_type_t::HttpRequestHeaders`: the only map this host serves.
pub const MAP_HTTP_REQUEST_HEADERS: u32 = 0;

/// `proxy_buffer_type_t` values this host serves.
pub const BUFFER_HTTP_REQUEST_BODY: u32 = 0;
/// `vm_config.configuration` in Envoy; here the API's `config_data`.
pub const BUFFER_VM_CONFIGURATION: u32 = 6;
/// `plugin_config.configuration` in Envoy; here the API's `config_data`.
pub const BUFFER_PLUGIN_CONFIGURATION: u32 = 7;

/// `proxy_action_t::Continue`, as returned by `proxy_on_request_headers`.
pub const ACTION_CONTINUE: u32 = 0;
/// `proxy_action_t::Pause`: wait for an event (an HTTP call's answer, a
/// timer) this host never delivers.
pub const ACTION_PAUSE: u32 = 1;

/// The exports that mark a module as speaking this ABI. 0.1.0 differs in
/// several signatures and is refused.
pub const ABI_MARKERS: [&str; 2] = ["proxy_abi_version_0_2_1", "proxy_abi_version_0_2_0"];

/// Serialises header pairs the way the ABI returns maps: a little-endian
/// `u32` count, then each pair's name and value lengths, then each name and
/// value followed by a NUL byte.
pub fn serialize_map<'a>(pairs: impl Iterator<Item = (&'a [u8], &'a [u8])> + Clone) -> Vec<u8> {
    let (count, bytes) = pairs.clone().fold((0u32, 4usize), |(n, b), (k, v)| {
        (n + 1, b + 10 + k.len() + v.len())
    });
    let mut out = Vec::with_capacity(bytes);
    out.extend_from_slice(&count.to_le_bytes());
    for (k, v) in pairs.clone() {
        out.extend_from_slice(&(k.len() as u32).to_le_bytes());
        out.extend_from_slice(&(v.len() as u32).to_le_bytes());
    }
    for (k, v) in pairs {
        out.extend_from_slice(k);
        out.push(0);
        out.extend_from_slice(v);
        out.push(0);
    }
    out
}

/// Parses a serialised map (see [`serialize_map`]); `None` when the lengths
/// do not add up.
pub fn deserialize_map(data: &[u8]) -> Option<Vec<(&[u8], &[u8])>> {
    if data.is_empty() {
        return Some(Vec::new());
    }
    let word = |at: usize| -> Option<usize> {
        let b = data.get(at..at + 4)?;
        Some(u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize)
    };
    let count = word(0)?;
    let mut text = 4usize.checked_add(count.checked_mul(8)?)?;
    let mut out = Vec::with_capacity(count.min(1024));
    for i in 0..count {
        let (klen, vlen) = (word(4 + i * 8)?, word(8 + i * 8)?);
        let key = data.get(text..text.checked_add(klen)?)?;
        text += klen + 1;
        let value = data.get(text..text.checked_add(vlen)?)?;
        text += vlen + 1;
        out.push((key, value));
    }
    (text <= data.len()).then_some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn maps_round_trip_in_the_abi_format() {
        let pairs: Vec<(&[u8], &[u8])> = vec![(b":path", b"/a?b"), (b"x-empty", b"")];
        let bytes = serialize_map(pairs.iter().copied());
        assert_eq!(&bytes[..4], &2u32.to_le_bytes());
        assert_eq!(deserialize_map(&bytes).unwrap(), pairs);
        assert_eq!(deserialize_map(&[]).unwrap(), vec![]);
        assert!(deserialize_map(&bytes[..bytes.len() - 3]).is_none());
        assert!(deserialize_map(&[255, 255, 255, 255]).is_none());
    }
}
