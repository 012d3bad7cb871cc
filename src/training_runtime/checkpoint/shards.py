"""One rank's state dict as a shard: its tensors' bytes, one after the other, and an index of everything else.

A shard is two files. ``shard_<rank>.bin`` holds the raw bytes of every tensor (a DTensor's local part), each at an
offset aligned to :data:`ALIGN`, in the order the state dict is walked. ``shard_<rank>.idx`` is a ``torch.save`` of
the state dict's *skeleton* (every tensor replaced by a ``meta`` tensor of its shape and dtype, every other value
kept) and of the table of slots (offset, size, dtype, shape, and a DTensor's global shape and offsets). Loading
it with ``weights_only=True`` unpickles only tensors, containers and plain types, as :func:`~.torch_io.load` does.

The staging buffer (:mod:`.staging`) has exactly the data file's layout, so the writer process writes it with
plain ``write`` calls and never imports torch. ``torch`` is imported inside the functions.
"""

from __future__ import annotations

import collections
import ctypes
import io
from dataclasses import dataclass
from typing import IO, Any, Dict, List, Optional, Sequence, Tuple

from training_runtime.checkpoint.layout import CheckpointError

ALIGN = 64
"""Every tensor starts at a multiple of this many bytes (any dtype's element size divides it)."""
INDEX_FORMAT = "hyperpod-cdk-shard/1"
Path = Tuple[Any, ...]


@dataclass(frozen=True)
class Slot:
    """Where one tensor's bytes are in the data file and what they are."""

    offset: int
    nbytes: int
    dtype: str
    shape: Tuple[int, ...]
    global_shape: Optional[Tuple[int, ...]] = None
    """A DTensor's whole shape; None for a plain tensor."""
    global_offset: Optional[Tuple[int, ...]] = None
    """Where a DTensor's local part starts in the whole tensor."""


@dataclass
class Flat:
    """A state dict taken apart: the tensors to stage (local, detached), their slots, and the index's other parts."""

    tensors: List[Any]
    slots: List[Slot]
    skeleton: Any
    size: int
    """Bytes of the data file (and of the staging buffer), alignment included."""

    @property
    def signature(self) -> Tuple[Tuple[str, Tuple[int, ...]], ...]:
        """What decides the buffer layout: equal signatures can reuse the same buffers."""
        return tuple((slot.dtype, slot.shape) for slot in self.slots)

    def index_bytes(self, rank: int, world: int, step: int) -> bytes:
        """The ``.idx`` file's content: the skeleton and the slot table, serialised now (a snapshot)."""
        import torch

        stream = io.BytesIO()
        table = [
            {
                "offset": s.offset,
                "nbytes": s.nbytes,
                "dtype": s.dtype,
                "shape": list(s.shape),
                "global_shape": None if s.global_shape is None else list(s.global_shape),
                "global_offset": None if s.global_offset is None else list(s.global_offset),
            }
            for s in self.slots
        ]
        header = {"format": INDEX_FORMAT, "rank": rank, "world_size": world, "step": step, "size": self.size}
        torch.save({"header": header, "slots": table, "skeleton": self.skeleton}, stream)
        return stream.getvalue()


def _aligned(offset: int) -> int:
    return (offset + ALIGN - 1) // ALIGN * ALIGN


def _dtype_name(dtype: Any) -> str:
    return str(dtype)[len("torch.") :]


def flatten(state: Any) -> Flat:
    """Take ``state`` apart (nested dicts, lists and tuples; tensors and DTensors at the leaves)."""
    tensors: List[Any] = []
    slots: List[Slot] = []
    offset = [0]

    def walk(value: Any, where: Path) -> Any:
        import torch

        if isinstance(value, torch.Tensor):
            local, global_shape, global_offset = _local_part(value, where)
            start = _aligned(offset[0])
            nbytes = local.numel() * local.element_size()
            offset[0] = start + nbytes
            tensors.append(local)
            slots.append(Slot(start, nbytes, _dtype_name(local.dtype), tuple(local.shape), global_shape, global_offset))
            return torch.empty(tuple(local.shape), dtype=local.dtype, device="meta")
        if isinstance(value, dict):
            kind = collections.OrderedDict if isinstance(value, collections.OrderedDict) else dict
            return kind((key, walk(item, (*where, key))) for key, item in value.items())
        if isinstance(value, list):
            return [walk(item, (*where, i)) for i, item in enumerate(value)]
        if isinstance(value, tuple):
            return tuple(walk(item, (*where, i)) for i, item in enumerate(value))
        return value

    if not isinstance(state, dict):
        raise CheckpointError("the state to save must be a dict (a state dict), got a {}".format(type(state).__name__))
    skeleton = walk(state, ())
    return Flat(tensors, slots, skeleton, _aligned(offset[0]))


def _local_part(value: Any, where: Path) -> Tuple[Any, Optional[Tuple[int, ...]], Optional[Tuple[int, ...]]]:
    """(the tensor whose bytes are saved, a DTensor's global shape, its local part's global offset)."""
    import torch

    if type(value) in (torch.Tensor, torch.nn.Parameter):
        return value.detach(), None, None
    dtensor = _dtensor_type()
    if dtensor is not None and isinstance(value, dtensor):
        chunks = value.__create_chunk_list__()
        local = value.to_local().detach()
        if len(chunks) != 1 or type(local) is not torch.Tensor:
            raise CheckpointError("{}: a DTensor whose local part is not one plain tensor".format(_name(where)))
        return local, tuple(value.shape), tuple(int(o) for o in chunks[0].offsets)
    raise CheckpointError(
        "{} is a {}: AsyncCheckpointer saves plain tensors and DTensors. Fix: convert it (e.g. with "
        "torch.distributed.checkpoint.state_dict.get_state_dict), or save it with save_distributed()".format(
            _name(where), type(value).__name__
        )
    )


def _dtensor_type() -> Any:
    """DTensor's class; None where torch was built without distributed."""
    try:
        from torch.distributed.tensor import DTensor
    except ImportError:
        return None
    return DTensor


def _name(where: Path) -> str:
    return "state" + "".join("[{!r}]".format(part) for part in where)


def state_bytes(state: Any) -> int:
    """Bytes a state dict's tensors take once staged: the host memory an asynchronous save holds (local parts of
    DTensors, alignment included)."""
    return flatten(state).size


def tensor_memory(tensor: Any) -> memoryview:
    """The bytes of a contiguous CPU tensor, without a copy."""
    nbytes = tensor.numel() * tensor.element_size()
    if nbytes == 0:
        return memoryview(b"")
    return memoryview((ctypes.c_char * nbytes).from_address(tensor.data_ptr())).cast("B")


def read_index(handle: IO[bytes], where: str, weights_only: bool = True) -> Dict[str, Any]:
    """A ``.idx`` file's content, checked."""
    import pickle

    import torch

    try:
        index = torch.load(handle, map_location="cpu", weights_only=weights_only)
    except pickle.UnpicklingError as error:
        raise CheckpointError(
            "cannot load {} with weights_only=True: the state holds objects other than tensors and plain types "
            "({}). Fix: resume(..., weights_only=False) if you trust this checkpoint".format(where, error)
        ) from error
    if not isinstance(index, dict) or index.get("header", {}).get("format") != INDEX_FORMAT:
        raise CheckpointError("{} is not a {} index".format(where, INDEX_FORMAT))
    return index


def restore(target: Dict[str, Any], index: Dict[str, Any], data: io.BufferedReader, where: str) -> None:
    """Load a shard into ``target`` in place: tensors are copied into the target's tensors (a DTensor's local
    part), other values replace the target's; a tensor the target lacks is created on the CPU."""
    slots = index["slots"]
    counter = [0]

    def read(slot: Dict[str, Any], into: Any) -> None:
        import torch

        dtype = getattr(torch, slot["dtype"])
        if tuple(into.shape) != tuple(slot["shape"]) or into.dtype != dtype:
            raise CheckpointError(
                "{}: {} holds {} {} here, the state to load into has {} {}. Fix: build the model and optimizer "
                "as the saving job did (same world size and sharding)".format(
                    where, slot.get("name", "a tensor"), slot["dtype"], slot["shape"], into.dtype, list(into.shape)
                )
            )
        direct = into.device.type == "cpu" and into.is_contiguous()
        landing = into if direct else torch.empty(tuple(slot["shape"]), dtype=dtype)
        data.seek(slot["offset"])
        view = tensor_memory(landing)
        if slot["nbytes"] and data.readinto(view) != slot["nbytes"]:
            raise CheckpointError("{} ends before the tensor at offset {}".format(where, slot["offset"]))
        if not direct:
            into.copy_(landing)

    def merge(saved: Any, into: Any, path: Path) -> Any:
        import torch

        if isinstance(saved, torch.Tensor) and saved.device.type == "meta":
            slot = dict(slots[counter[0]], name=_name(path))
            counter[0] += 1
            if isinstance(into, torch.Tensor):
                dtensor = _dtensor_type()
                is_dtensor = dtensor is not None and isinstance(into, dtensor)
                _check_placement(slot, into if is_dtensor else None, where)
                with torch.no_grad():
                    read(slot, into.to_local() if is_dtensor else into)
                return into
            if slot["global_shape"] is not None:
                raise CheckpointError(
                    "{}: {} is a DTensor; the state to load into has none there".format(where, slot["name"])
                )
            fresh = torch.empty(tuple(slot["shape"]), dtype=getattr(torch, slot["dtype"]))
            read(slot, fresh)
            return fresh
        if isinstance(saved, dict) and isinstance(into, dict):
            for key, item in saved.items():
                into[key] = merge(item, into.get(key), (*path, key))
            return into
        if isinstance(saved, list) and isinstance(into, list) and len(saved) == len(into):
            for i, item in enumerate(saved):
                into[i] = merge(item, into[i], (*path, i))
            return into
        if isinstance(saved, (list, tuple)):
            others = into if isinstance(into, (list, tuple)) and len(into) == len(saved) else [None] * len(saved)
            merged = [merge(item, others[i], (*path, i)) for i, item in enumerate(saved)]
            return merged if isinstance(saved, list) else tuple(merged)
        if isinstance(saved, dict):
            return {key: merge(item, None, (*path, key)) for key, item in saved.items()}
        return saved

    merge(index["skeleton"], target, ())
    if counter[0] != len(slots):
        raise CheckpointError("{}: the index lists {} tensors, its skeleton {}".format(where, len(slots), counter[0]))


def _check_placement(slot: Dict[str, Any], into: Any, where: str) -> None:
    """A DTensor loads only into a DTensor of the same global shape whose local part starts at the same offset."""
    if into is None:
        if slot["global_shape"] is not None:
            raise CheckpointError(
                "{}: {} was saved as a DTensor; the state to load into has a plain tensor there".format(
                    where, slot["name"]
                )
            )
        return
    offsets = [int(o) for o in into.__create_chunk_list__()[0].offsets]
    if slot["global_shape"] != list(into.shape) or slot["global_offset"] != offsets:
        raise CheckpointError(
            "{}: {} was saved as the part at {} of a {} DTensor; here it is the part at {} of a {} one. "
            "AsyncCheckpointer resumes with the sharding it saved with (same world size and mesh); to reshard, "
            "save with save_distributed()".format(
                where, slot["name"], slot["global_offset"], slot["global_shape"], offsets, list(into.shape)
            )
        )


def slot_names(slots: Sequence[Slot]) -> List[str]:
    """For messages: each slot as ``dtype[shape]``."""
    return ["{}{}".format(s.dtype, list(s.shape)) for s in slots]
