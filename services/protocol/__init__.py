"""The protocol between the trusted parent and its children, versioned with the result schema.

- `messages`: one typed class per command (parent -> child) and per reply (child -> parent), and `decode`,
  which validates a child's reply in the parent;
- `channel`: framed JSON headers plus raw payloads over a private pipe pair (never pickle);
- `tensors`: describing values as JSON and moving tensors (bytes on CPU, CUDA IPC into parent-owned buffers).

Torch is imported by `tensors` only; `messages` and `channel` are importable without it.
"""
