"""A stand-in for ``torch.npu`` (torch-npu 2.7.1's API, the parts this package uses), for tests on
machines without an NPU. Install it with ``monkeypatch.setattr(torch, "npu", FakeNpu(...), raising=False)``.

It has devices with their vector-core counts, a current device, per-stream and per-device core
limits (``set_stream_limit`` / ``get_stream_limit``, ``get_device_limit``: answers of the form
``{"cube_core_num": c, "vector_core_num": v}``, 0 where no limit is set), timing events and NPU
graphs. A graph cannot record kernels here: ``capture`` (used by a test's stand-in for the
operator) records calls made while a capture is open, and ``replay`` makes them again.
"""

from __future__ import annotations

import contextlib
import time
from types import SimpleNamespace


class FakeStream:
    def __init__(self, device_index: int, stream_id: int):
        self.device_index = device_index
        self.stream_id = stream_id
        self.device_type = 20  # torch-npu's PrivateUse1

    def synchronize(self):
        pass


class FakeEvent:
    def __init__(self, enable_timing: bool = False):
        self.enable_timing = enable_timing
        self.at = None

    def record(self, stream=None):
        self.at = time.perf_counter()

    def synchronize(self):
        pass

    def elapsed_time(self, end: "FakeEvent") -> float:
        return (end.at - self.at) * 1e3  # milliseconds, as torch's events


class FakeGraph:
    def __init__(self):
        self.calls = []

    def replay(self):
        for fn, args, kwargs in self.calls:
            fn(*args, **kwargs)


class FakeNpu:
    """``vector_cores``: per device index. ``vector_core_num=False`` gives properties without that
    field (a torch-npu older than 2.7.1)."""

    Event = FakeEvent
    NPUGraph = FakeGraph

    def __init__(self, vector_cores=(40, 48), vector_core_num: bool = True, names=None):
        self.cores = list(vector_cores)
        self.with_vector_core_num = vector_core_num
        self.names = names or [f"Ascend910B-stand-in-{i}" for i in range(len(self.cores))]
        self.current = 0
        self.streams = {i: FakeStream(i, 0) for i in range(len(self.cores))}
        self.stream_limits: dict[tuple[int, int], int] = {}
        self.device_limits: dict[int, int] = {}
        self.queries = {"get_device_properties": 0, "get_stream_limit": 0, "get_device_limit": 0}
        self.capturing: FakeGraph | None = None

    # devices
    def is_available(self):
        return True

    def device_count(self):
        return len(self.cores)

    def current_device(self):
        return self.current

    def set_device(self, index):
        self.current = index

    @contextlib.contextmanager
    def device(self, index):
        before, self.current = self.current, index
        try:
            yield
        finally:
            self.current = before

    def get_device_name(self, index=None):
        return self.names[self.current if index is None else index]

    def get_device_properties(self, index):
        self.queries["get_device_properties"] += 1
        props = SimpleNamespace(name=self.names[index], cube_core_num=self.cores[index] // 2)
        if self.with_vector_core_num:
            props.vector_core_num = self.cores[index]
        return props

    def synchronize(self, device=None):
        pass

    # streams and core limits
    def current_stream(self, device=None):
        index = self.current if device is None else getattr(device, "index", device)
        return self.streams[self.current if index is None else index]

    def set_stream(self, stream):
        self.streams[stream.device_index] = stream

    def set_stream_limit(self, stream, cube_num=-1, vector_num=-1):
        if vector_num != -1:
            self.stream_limits[(stream.device_index, stream.stream_id)] = vector_num

    def get_stream_limit(self, stream):
        self.queries["get_stream_limit"] += 1
        return {"cube_core_num": 0,
                "vector_core_num": self.stream_limits.get((stream.device_index, stream.stream_id), 0)}

    def get_device_limit(self, device):
        self.queries["get_device_limit"] += 1
        return {"cube_core_num": 0, "vector_core_num": self.device_limits.get(device, 0)}

    # graphs
    def is_current_stream_capturing(self):
        return self.capturing is not None

    @contextlib.contextmanager
    def graph(self, npu_graph, **kwargs):
        self.capturing = npu_graph
        try:
            yield
        finally:
            self.capturing = None

    def capture(self, fn, *args, **kwargs):
        """Call ``fn``; while a graph is being captured, also record the call for its replays."""
        if self.capturing is not None:
            self.capturing.calls.append((fn, args, kwargs))
        return fn(*args, **kwargs)
