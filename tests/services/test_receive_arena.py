"""A role's large receive buffers come back for the next delivery only once nothing outside the arena holds them
(services.parent.receive_arena); on a GPU, tests/services/test_gpu.py maps them in a child."""

from __future__ import annotations

import torch

from services.parent.receive_arena import ReceiveArena


def test_a_buffer_comes_back_once_its_view_is_dropped():
    arena = ReceiveArena(None, device="cpu")
    first = arena.take(torch.float32, [4, 8])
    address = first.data_ptr()
    del first
    again = arena.take(torch.float32, [4, 8])
    assert again.data_ptr() == address and len(arena) == 1


def test_a_buffer_still_held_in_any_form_is_never_handed_out_twice():
    arena = ReceiveArena(None, device="cpu")
    held = arena.take(torch.float32, [4, 8])
    row = arena.take(torch.float32, [4, 8])[1]  # only a derived view of the second survives
    flat = held.view(-1)
    del held
    third = arena.take(torch.float32, [4, 8])
    assert len({flat.data_ptr(), row.data_ptr() - 8 * 4, third.data_ptr()}) == 3 and len(arena) == 3


def test_another_dtype_or_shape_gets_a_buffer_of_its_own():
    arena = ReceiveArena(None, device="cpu")
    a = arena.take(torch.float32, [4, 8])
    del a
    b = arena.take(torch.float16, [4, 8])
    del b
    c = arena.take(torch.float32, [8, 4])
    assert (c.dtype, list(c.shape)) == (torch.float32, [8, 4]) and len(arena) == 3
