"""kernels.streams: the order of waits and launches that makes an overlapped pair safe.

CUDA streams cannot run on this machine; the fake below records what the real torch.cuda calls
(``current_stream``, ``Stream``, ``stream``, ``Stream.wait_stream``) would be asked, in order."""

import contextlib

import pytest
import torch

from ascendopt.kernels._lib import streams


class _FakeStream:
    def __init__(self, name, log):
        self.name, self.log = name, log

    def wait_stream(self, other):
        self.log.append(f"{self.name} waits for {other.name}")


@pytest.fixture()
def fake_cuda(monkeypatch):
    log, current = [], []
    main = _FakeStream("main", log)
    current.append(main)

    @contextlib.contextmanager
    def on(stream):
        current.append(stream)
        try:
            yield
        finally:
            current.pop()

    monkeypatch.setattr(streams, "_side", {})
    monkeypatch.setattr(torch.cuda, "current_stream", lambda device=None: current[-1])
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    monkeypatch.setattr(torch.cuda, "Stream", lambda device=None: _FakeStream(f"side{device}", log))
    monkeypatch.setattr(torch.cuda, "stream", on)
    return log, current


def test_side_work_is_fenced_on_both_sides_and_issued_first(fake_cuda):
    log, current = fake_cuda
    streams.overlapped(lambda: log.append(f"edge on {current[-1].name}"),
                       lambda: log.append(f"bulk on {current[-1].name}"), torch.device("cuda", 0))
    assert log == ["side0 waits for main", "edge on side0", "bulk on main", "main waits for side0"]
    assert current[-1].name == "main"  # the caller's stream is current again


def test_one_side_stream_per_device_is_kept(fake_cuda):
    first = streams.side_stream(torch.device("cuda", 1))
    assert streams.side_stream(torch.device("cuda", 1)) is first and first.name == "side1"
    assert streams.side_stream("cuda").name == "side0"  # no index: the current device
