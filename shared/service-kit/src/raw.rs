//! A gRPC codec that sends bytes as they are: for requests no typed client can build (bytes that are not the message
//! they claim to be, in tests) or that were encoded ahead of time (a benchmark that must not pay for encoding on the
//! connection it measures). Answers are counted, not decoded.

use tonic::Status;

/// Sends raw bytes as the request message and ignores the answer's body: for requests no typed client can build.
#[derive(Clone, Copy)]
pub struct RawCodec;

/// [`RawCodec`]'s encoder.
pub struct RawEncoder;
/// [`RawCodec`]'s decoder.
pub struct RawDecoder;

impl tonic::codec::Codec for RawCodec {
    type Encode = Vec<u8>;
    type Decode = ();
    type Encoder = RawEncoder;
    type Decoder = RawDecoder;
    fn encoder(&mut self) -> RawEncoder {
        RawEncoder
    }
    fn decoder(&mut self) -> RawDecoder {
        RawDecoder
    }
}

impl tonic::codec::Encoder for RawEncoder {
    type Item = Vec<u8>;
    type Error = Status;
    fn encode(
        &mut self,
        item: Vec<u8>,
        dst: &mut tonic::codec::EncodeBuf<'_>,
    ) -> Result<(), Status> {
        bytes::BufMut::put_slice(dst, &item);
        Ok(())
    }
}

impl tonic::codec::Decoder for RawDecoder {
    type Item = ();
    type Error = Status;
    fn decode(&mut self, src: &mut tonic::codec::DecodeBuf<'_>) -> Result<Option<()>, Status> {
        let n = bytes::Buf::remaining(src);
        bytes::Buf::advance(src, n);
        Ok(Some(()))
    }
}
