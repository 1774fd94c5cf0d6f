"""Large blobs (agent transcripts): split into content-addressed chunks, described by a BlobRef."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, Sequence

from baton_client._proto.baton.v1 import checkpoint_pb2, model_pb2

#: The server's limits for PutChunks: 1 MiB a chunk, 8 MiB a request.
MAX_CHUNK_BYTES = 1024 * 1024
MAX_PUT_CHUNKS_BYTES = 8 * 1024 * 1024


def make_blob(
    data: bytes,
    *,
    role: str = "transcript",
    content_type: str = "",
    agent_session_id: str = "",
    cwd: str = "",
    chunk_size: int = MAX_CHUNK_BYTES,
) -> tuple[model_pb2.BlobRef, list[checkpoint_pb2.Chunk]]:
    """Splits ``data`` into chunks (sha256-addressed) and the BlobRef that lists them."""
    if not 0 < chunk_size <= MAX_CHUNK_BYTES:
        raise ValueError(f"chunk_size must be 1..{MAX_CHUNK_BYTES}")
    chunks = [
        checkpoint_pb2.Chunk(digest=hashlib.sha256(piece).hexdigest(), data=piece)
        for piece in (data[i : i + chunk_size] for i in range(0, len(data), chunk_size))
    ]
    ref = model_pb2.BlobRef(
        role=role,
        digest=hashlib.sha256(data).hexdigest(),
        size_bytes=len(data),
        chunks=[c.digest for c in chunks],
        content_type=content_type,
        agent_session_id=agent_session_id,
        cwd=cwd,
    )
    return ref, chunks


def batches(chunks: Sequence[checkpoint_pb2.Chunk]) -> Iterator[list[checkpoint_pb2.Chunk]]:
    """Groups chunks into PutChunks requests within the server's 8 MiB per request."""
    batch: list[checkpoint_pb2.Chunk] = []
    size = 0
    for chunk in chunks:
        if batch and size + len(chunk.data) > MAX_PUT_CHUNKS_BYTES:
            yield batch
            batch, size = [], 0
        batch.append(chunk)
        size += len(chunk.data)
    if batch:
        yield batch


def join_chunks(ref: model_pb2.BlobRef, chunks: Sequence[checkpoint_pb2.Chunk]) -> bytes:
    """Reassembles a blob from its chunks (any order), checking every digest."""
    by_digest = {c.digest: c.data for c in chunks}
    missing = [d for d in ref.chunks if d not in by_digest]
    if missing:
        raise ValueError(f"blob {ref.digest}: {len(missing)} chunk(s) missing, e.g. {missing[0]}")
    data = b"".join(by_digest[d] for d in ref.chunks)
    if hashlib.sha256(data).hexdigest() != ref.digest:
        raise ValueError(f"blob {ref.digest}: reassembled bytes do not match the digest")
    return data
