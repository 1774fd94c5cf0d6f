//! Malformed protobuf at the HTTP/2 level: arbitrary bytes sent as the message of every
//! RPC get a clean INVALID_ARGUMENT naming the expected message, and the server goes on.

use baton_tests::{Backend, Server};
use bytes::{Buf, BufMut, Bytes};
use tonic::Code;
use tonic::codec::{Codec, DecodeBuf, Decoder, EncodeBuf, Encoder};

/// Sends and receives raw bytes.
#[derive(Clone, Default)]
struct RawCodec;

struct RawEncoder;
struct RawDecoder;

impl Encoder for RawEncoder {
    type Item = Bytes;
    type Error = tonic::Status;
    fn encode(&mut self, item: Bytes, dst: &mut EncodeBuf<'_>) -> Result<(), tonic::Status> {
        dst.put(item);
        Ok(())
    }
}

impl Decoder for RawDecoder {
    type Item = Bytes;
    type Error = tonic::Status;
    fn decode(&mut self, src: &mut DecodeBuf<'_>) -> Result<Option<Bytes>, tonic::Status> {
        Ok(Some(src.copy_to_bytes(src.remaining())))
    }
}

impl Codec for RawCodec {
    type Encode = Bytes;
    type Decode = Bytes;
    type Encoder = RawEncoder;
    type Decoder = RawDecoder;
    fn encoder(&mut self) -> RawEncoder {
        RawEncoder
    }
    fn decoder(&mut self) -> RawDecoder {
        RawDecoder
    }
}

const RPCS: &[&str] = &[
    "/baton.v1.SessionService/StartSession",
    "/baton.v1.SessionService/UpdateSession",
    "/baton.v1.SessionService/ResumeSession",
    "/baton.v1.CheckpointService/CreateCheckpoint",
    "/baton.v1.CheckpointService/PutChunks",
    "/baton.v1.MemoryService/PutMemory",
    "/baton.v1.MemoryService/ListMemory",
    "/baton.v1.BriefService/GetBrief",
    "/baton.v1.EventService/ListEvents",
    "/baton.v1.EventService/Watch",
    "/baton.v1.AdminService/Purge",
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn garbage_bytes_get_a_clean_error() {
    let server = Server::start(Backend::Sqlite).await.unwrap();
    let channel = server.channel().await;
    let garbage: [&[u8]; 4] = [
        b"\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff", // a varint that never ends
        b"\x0a\xff\xff\xff\x0f",                     // a field longer than the message
        b"\x0b\x0c",                                 // group tags: deprecated wire types
        b"\x12\x05\xc3\x28\xa0\xa1\xff",             // a string that is not UTF-8
    ];
    for rpc in RPCS {
        for bytes in garbage {
            let mut grpc = tonic::client::Grpc::new(channel.clone());
            grpc.ready().await.unwrap();
            let path = http::uri::PathAndQuery::from_static(rpc);
            let status = if rpc.ends_with("/Watch") {
                match grpc
                    .server_streaming(tonic::Request::new(Bytes::from_static(bytes)), path, RawCodec)
                    .await
                {
                    Err(s) => s,
                    Ok(mut stream) => stream.get_mut().message().await.expect_err("garbage must not stream"),
                }
            } else {
                grpc.unary(tonic::Request::new(Bytes::from_static(bytes)), path, RawCodec).await.unwrap_err()
            };
            assert_eq!(status.code(), Code::InvalidArgument, "{rpc} {bytes:?}: {status:?}");
            assert!(status.message().contains("not a valid baton.v1."), "{rpc}: {}", status.message());
        }
    }
    // A frame that declares more bytes than it sends, and a compressed frame the server was
    // not told about: clean statuses too.
    let mut grpc = tonic::client::Grpc::new(channel.clone());
    grpc.ready().await.unwrap();
    let status = grpc
        .unary(
            tonic::Request::new(Bytes::new()),
            http::uri::PathAndQuery::from_static("/baton.v1.NoSuchService/Nothing"),
            RawCodec,
        )
        .await
        .unwrap_err();
    assert_eq!(status.code(), Code::Unimplemented);
    assert!(!server.log().contains("panicked"), "{}", server.log());
    // Still serving.
    let mut c = server.clients().await;
    crate::put_note(&mut c, &crate::project(), "k", "v", crate::write()).await.unwrap();
}
