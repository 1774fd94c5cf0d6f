//! The codec of every `baton.v1` stub: tonic-prost's, except that a request that is not
//! valid protobuf is `INVALID_ARGUMENT` naming the message type (the caller sent bad
//! bytes; tonic-prost would answer `INTERNAL`, which reads like a server bug).

use std::marker::PhantomData;

use prost::Message;
use tonic::Status;
use tonic::codec::{BufferSettings, Codec, DecodeBuf, Decoder};

#[derive(Debug, Clone)]
pub struct BatonCodec<T, U>(PhantomData<(T, U)>);

impl<T, U> Default for BatonCodec<T, U> {
    fn default() -> Self {
        Self(PhantomData)
    }
}

impl<T, U> Codec for BatonCodec<T, U>
where
    T: Message + Send + 'static,
    U: Message + Default + Send + 'static,
{
    type Encode = T;
    type Decode = U;
    type Encoder = <tonic_prost::ProstCodec<T, U> as Codec>::Encoder;
    type Decoder = BatonDecoder<U>;

    fn encoder(&mut self) -> Self::Encoder {
        tonic_prost::ProstCodec::<T, U>::default().encoder()
    }

    fn decoder(&mut self) -> Self::Decoder {
        BatonDecoder(PhantomData)
    }
}

#[derive(Debug)]
pub struct BatonDecoder<U>(PhantomData<U>);

impl<U: Message + Default> Decoder for BatonDecoder<U> {
    type Item = U;
    type Error = Status;

    fn decode(&mut self, buf: &mut DecodeBuf<'_>) -> Result<Option<U>, Status> {
        U::decode(buf).map(Some).map_err(|e| {
            let name = std::any::type_name::<U>().rsplit("::").next().unwrap_or("message");
            crate::details::status(
                tonic::Code::InvalidArgument,
                format!("the message is not a valid baton.v1.{name} (protobuf: {e})"),
                crate::details::reason::MALFORMED_MESSAGE,
                Vec::new(),
            )
        })
    }

    fn buffer_settings(&self) -> BufferSettings {
        BufferSettings::default()
    }
}
