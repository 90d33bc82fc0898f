//! Answers that are wire bytes already: GetDocument's and BatchGetDocuments' documents are
//! written straight from the stored typed JSON (docstore-core's `proto_wire`), with no prost
//! tree between, so their methods' codec ([`EncodedCodec`], build.rs) sends the bytes as they
//! are; requests still decode with prost.

use std::marker::PhantomData;

use bytes::BufMut as _;
use tonic::codec::{Codec, EncodeBuf, Encoder};
use tonic::Status;
use tonic_prost::prost::Message;
use tonic_prost::ProstDecoder;

/// An encoded protobuf message (its content, without a length before it).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Encoded(pub Vec<u8>);

impl Encoded {
    /// `message` encoded by prost.
    pub fn of(message: &impl Message) -> Encoded {
        Encoded(message.encode_to_vec())
    }
}

/// The codec of a method whose answers are [`Encoded`] and whose requests are `U`.
#[derive(Debug, Clone, Copy)]
pub struct EncodedCodec<U>(PhantomData<U>);

impl<U> Default for EncodedCodec<U> {
    fn default() -> Self {
        EncodedCodec(PhantomData)
    }
}

impl<U: Message + Default + Send + 'static> Codec for EncodedCodec<U> {
    type Encode = Encoded;
    type Decode = U;
    type Encoder = EncodedEncoder;
    type Decoder = ProstDecoder<U>;

    fn encoder(&mut self) -> EncodedEncoder {
        EncodedEncoder
    }

    fn decoder(&mut self) -> ProstDecoder<U> {
        ProstDecoder::default()
    }
}

/// Writes an [`Encoded`] answer as it is.
#[derive(Debug, Clone, Copy, Default)]
pub struct EncodedEncoder;

impl Encoder for EncodedEncoder {
    type Item = Encoded;
    type Error = Status;

    fn encode(&mut self, item: Encoded, buf: &mut EncodeBuf<'_>) -> Result<(), Status> {
        buf.put_slice(&item.0);
        Ok(())
    }
}
