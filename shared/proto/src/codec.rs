//! The protobuf codec of every generated client and server (`build.rs` names it) and of the gateway's hand-wired
//! routes, which choose how a message that does not decode is reported.
//!
//! A long stream holds its encode buffer as long as it is open, and a stream of events is many small messages (a
//! text delta is tens of bytes): a buffer that starts at 1 KiB and grows when a large message comes saves ~7 KiB per
//! open stream over tonic's 8 KiB (a session-processor serving 1 000 `Prompt` streams holds 1 000 of them). And the
//! decoding is the user's to choose: a server decoding a caller's request wants bytes that are not the message to be
//! the caller's mistake (`INVALID_ARGUMENT`), or may keep a large request encoded for later; a client reading its
//! peer's answer wants them to be `INTERNAL`, as tonic says (the default).

use std::marker::PhantomData;

use tonic::Status;
use tonic::codec::{BufferSettings, Codec, DecodeBuf, Decoder, EncodeBuf, Encoder};

/// tonic's default buffer size: the decode buffer's, unless set.
pub const DEFAULT_BUFFER: usize = 8 * 1024;

/// Where the encode buffer starts, unless set: it grows to the largest message encoded.
pub const SMALL_BUFFER: usize = 1024;

/// Bytes encoded before a stream yields its buffer to HTTP/2 even though more messages are ready: tonic's default,
/// which matters only for bursts.
const YIELD_THRESHOLD: usize = 32 * 1024;

/// How a codec makes its message out of the received bytes (all of `src`).
pub type DecodeFn<D> = fn(&mut DecodeBuf<'_>) -> Result<D, Status>;

/// Protobuf codec encoding `E` and decoding `D`, with set starting sizes for the encode and decode buffers.
pub struct ProstCodec<E, D> {
    encode_buffer: usize,
    decode_buffer: usize,
    decode: DecodeFn<D>,
    types: PhantomData<fn(E)>,
}

impl<E, D> Clone for ProstCodec<E, D> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<E, D> Copy for ProstCodec<E, D> {}

impl<E, D: prost::Message + Default> Default for ProstCodec<E, D> {
    fn default() -> Self {
        Self::decoding_with(|src| D::decode(src).map_err(|e| Status::internal(e.to_string())))
    }
}

impl<E, D: prost::Message + Default> ProstCodec<E, D> {
    /// A small encode buffer, tonic's decode buffer; a message that does not decode is `INTERNAL`.
    pub fn new() -> Self {
        Self::default()
    }
}

impl<E, D> ProstCodec<E, D> {
    /// A small encode buffer, tonic's decode buffer; messages are decoded by `decode`.
    pub fn decoding_with(decode: DecodeFn<D>) -> Self {
        ProstCodec {
            encode_buffer: SMALL_BUFFER,
            decode_buffer: DEFAULT_BUFFER,
            decode,
            types: PhantomData,
        }
    }

    /// The encode buffer starts at `bytes`.
    pub fn encode_buffer(mut self, bytes: usize) -> Self {
        self.encode_buffer = bytes;
        self
    }

    /// The decode buffer starts at `bytes`.
    pub fn decode_buffer(mut self, bytes: usize) -> Self {
        self.decode_buffer = bytes;
        self
    }
}

impl<E, D> Codec for ProstCodec<E, D>
where
    E: prost::Message + Send + 'static,
    D: Send + 'static,
{
    type Encode = E;
    type Decode = D;
    type Encoder = Self;
    type Decoder = Self;

    fn encoder(&mut self) -> Self {
        *self
    }

    fn decoder(&mut self) -> Self {
        *self
    }
}

impl<E: prost::Message, D> Encoder for ProstCodec<E, D> {
    type Item = E;
    type Error = Status;

    fn encode(&mut self, item: E, dst: &mut EncodeBuf<'_>) -> Result<(), Status> {
        // `EncodeBuf` grows as needed, so encoding cannot run out of room.
        item.encode(dst)
            .map_err(|e| Status::internal(e.to_string()))
    }

    fn buffer_settings(&self) -> BufferSettings {
        BufferSettings::new(self.encode_buffer, YIELD_THRESHOLD)
    }
}

impl<E, D> Decoder for ProstCodec<E, D> {
    type Item = D;
    type Error = Status;

    fn decode(&mut self, src: &mut DecodeBuf<'_>) -> Result<Option<D>, Status> {
        (self.decode)(src).map(Some)
    }

    fn buffer_settings(&self) -> BufferSettings {
        BufferSettings::new(self.decode_buffer, YIELD_THRESHOLD)
    }
}
