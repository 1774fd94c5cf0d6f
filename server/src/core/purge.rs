//! Purging a value (a leaked secret) from stored bytes: every occurrence is overwritten in
//! place with `*` of the same length. Keeping the length keeps encoded protobuf valid (no
//! length prefix changes), keeps transcript chunks at their sizes, and keeps UTF-8 valid.

/// Shorter values would match too much (and could hit protobuf framing bytes).
pub const MIN_LEN: usize = 8;

/// Masks every non-overlapping occurrence of `needle`; returns how many.
pub fn mask_bytes(data: &mut [u8], needle: &[u8]) -> usize {
    if needle.is_empty() || data.len() < needle.len() {
        return 0;
    }
    let mut count = 0;
    let mut i = 0;
    while i + needle.len() <= data.len() {
        if data[i..].starts_with(needle) {
            data[i..i + needle.len()].fill(b'*');
            count += 1;
            i += needle.len();
        } else {
            i += 1;
        }
    }
    count
}

/// The string with `needle` masked, or `None` when it does not occur.
pub fn mask_str(s: &str, needle: &str) -> Option<String> {
    s.contains(needle).then(|| s.replace(needle, &"*".repeat(needle.len())))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn masks_in_place_keeping_length() {
        let mut data = b"key=sk-live-12345678; again sk-live-12345678".to_vec();
        let n = data.len();
        assert_eq!(mask_bytes(&mut data, b"sk-live-12345678"), 2);
        assert_eq!(data.len(), n);
        assert_eq!(&data[..20], b"key=****************");
        assert_eq!(mask_bytes(&mut data, b"absent-value"), 0);
        assert_eq!(mask_str("tok ghp_abcdefgh end", "ghp_abcdefgh").unwrap(), "tok ************ end");
        assert_eq!(mask_str("clean", "ghp_abcdefgh"), None);
    }

    #[test]
    fn masked_protobuf_still_decodes() {
        use prost::Message;
        let actor = baton_proto::v1::Actor {
            token: "x".into(),
            host: "laptop-secret123".into(),
            ..Default::default()
        };
        let mut bytes = actor.encode_to_vec();
        assert_eq!(mask_bytes(&mut bytes, b"secret123"), 1);
        let back = baton_proto::v1::Actor::decode(bytes.as_slice()).unwrap();
        assert_eq!(back.host, "laptop-*********");
    }
}
