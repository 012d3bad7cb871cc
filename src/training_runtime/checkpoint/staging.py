"""Host buffers the trainer copies its state into, shared with the writer process; allocated once, reused.

One anonymous shared-memory file (``memfd_create``) holds every tensor of a shard at the offsets of the shard's
data file (:mod:`.shards`). The trainer maps it and keeps one tensor view per slot; the writer process receives the
file descriptor over a Unix socket and maps it read-only. Nothing has a name in ``/dev/shm``: the memory goes away
when both processes have closed it, whichever dies first, so a crash leaks nothing.

Pinned memory: where CUDA is available the whole mapping is page-locked with ``cudaHostRegister`` (what
``Tensor.pin_memory()`` does for a private allocation; shared memory must be registered in place), so copies from
the GPU run at full speed and without a staging bounce. On a CPU-only torch the buffer is plain shared memory and
the copy is a ``memcpy``.

The buffers are reused while the state keeps its tensors' shapes and dtypes (:attr:`.shards.Flat.signature`); a
different signature frees them and allocates new ones. ``torch`` is imported inside the methods.
"""

from __future__ import annotations

import mmap
import os
from typing import Any, Callable, List, Optional, Tuple

from training_runtime.checkpoint.shards import Flat
from training_runtime.log import log


class StagingBuffers:
    """The shared host buffers of one rank. ``pin``: None decides from ``torch.cuda.is_available()``."""

    def __init__(self, pin: Optional[bool] = None) -> None:
        self._pin = pin
        self.fd: Optional[int] = None
        self.size = 0
        """Bytes mapped (at least 1)."""
        self.used = 0
        """Bytes the current layout uses: the state's :func:`~.shards.state_bytes`."""
        self.pinned = False
        self.generation = 0
        """Increases with every allocation: the writer maps a new buffer when it changes."""
        self.allocations = 0
        self._map: Optional[mmap.mmap] = None
        self._base: Any = None
        self._views: List[Any] = []
        self._signature: Optional[Tuple[Any, ...]] = None

    def fits(self, flat: Flat) -> bool:
        return self.fd is not None and self._signature == flat.signature

    def prepare(self, flat: Flat) -> bool:
        """Buffers for ``flat``'s layout: the current ones when the signature matches (False), else new (True)."""
        if self.fits(flat):
            return False
        self.release()
        import torch

        size = max(flat.size, 1)
        fd = os.memfd_create("hyperpod-checkpoint-staging", os.MFD_CLOEXEC)
        try:
            os.ftruncate(fd, size)
            mapping = mmap.mmap(fd, size)
        except BaseException:
            os.close(fd)
            raise
        base = torch.frombuffer(mapping, dtype=torch.uint8)
        pin = torch.cuda.is_available() if self._pin is None else self._pin
        if pin:
            pin = _register(base, size)
        self.fd, self.size, self.pinned, self._map, self._base = fd, size, pin, mapping, base
        self._views = [
            base[slot.offset : slot.offset + slot.nbytes].view(getattr(torch, slot.dtype)).view(slot.shape)
            for slot in flat.slots
        ]
        self._signature = flat.signature
        self.used = flat.size
        self.generation += 1
        self.allocations += 1
        return True

    def stage(self, flat: Flat, halfway: Optional[Callable[[], None]] = None) -> None:
        """Copy ``flat``'s tensors into the buffers; returns once the copies are done (the trainer may then change
        its tensors). ``halfway`` runs after the first half of the tensors (a test's breakpoint)."""
        import torch

        cuda = False
        half = len(flat.tensors) // 2
        with torch.no_grad():
            for i, source in enumerate(flat.tensors):
                view = self._views[i]
                if i == half and halfway is not None:
                    halfway()
                on_gpu = source.device.type == "cuda"
                cuda = cuda or on_gpu
                view.copy_(source, non_blocking=on_gpu and self.pinned)
        if cuda:
            torch.cuda.synchronize()

    def release(self) -> None:
        """Free the buffers (the writer keeps its own mapping until it has finished with it)."""
        if self.fd is None:
            return
        if self.pinned:
            _unregister(self._base)
        self._views = []
        self._base = None
        mapping, self._map = self._map, None
        try:
            if mapping is not None:
                mapping.close()
        except BufferError:  # a view is still referenced somewhere: the mapping goes with it
            pass
        os.close(self.fd)
        self.fd, self.size, self.used, self.pinned, self._signature = None, 0, 0, False, None


CUDA_HOST_REGISTER_PORTABLE = 1
"""``cudaHostRegisterPortable``: pinned for every CUDA context (what torch's DCP stager passes for shared memory)."""


def _register(base: Any, size: int) -> bool:
    """Page-lock the mapping; False (and a warning in the log) where CUDA refuses: the copies still work, slower."""
    import torch

    try:
        result = int(torch.cuda.cudart().cudaHostRegister(base.data_ptr(), size, CUDA_HOST_REGISTER_PORTABLE))
        problem = "cudaError {}".format(result) if result != 0 else ""
    except Exception as error:  # a torch without CUDA, a driver that refuses
        problem = "{}: {}".format(type(error).__name__, error)
    if problem:
        log(
            "warning",
            message="cudaHostRegister of the {} byte checkpoint staging buffer failed ({}); staging unpinned".format(
                size, problem
            ),
        )
    return not problem


def _unregister(base: Any) -> None:
    import torch

    torch.cuda.cudart().cudaHostUnregister(base.data_ptr())
