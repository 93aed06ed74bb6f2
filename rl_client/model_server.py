"""A small OpenAI-compatible chat server around a local Hugging Face model (`kernelgym-rl serve-model`), so that a
checkpoint (SmolLM2 from its GGUF, or one `kernelgym-rl sft` wrote) can be collected from or evaluated like any
hosted model, with no vLLM. One request is generated at a time, by `rl_client.local.policy.LocalPolicy`:

    POST /v1/chat/completions   {"messages": [...], "temperature", "top_p", "max_tokens"} -> choices[0].message
    GET  /v1/models
"""

from __future__ import annotations

import threading
import time
import uuid
from typing import Any

from fastapi import FastAPI
from pydantic import BaseModel, Field

from rl_client.local.policy import LocalPolicy


class ChatMessage(BaseModel):
    role: str
    content: str


class ChatRequest(BaseModel):
    model: str | None = None
    messages: list[ChatMessage] = Field(min_length=1)
    temperature: float = Field(1.0, gt=0, description="Sampling only: greedy decoding (0) is not offered.")
    top_p: float = Field(1.0, gt=0, le=1)
    max_tokens: int = Field(512, ge=1)


def create_model_app(model: Any, tokenizer: Any, name: str, device: str = "cpu", max_tokens: int = 8192) -> FastAPI:
    """The app serving `model` as `name`; a request's `max_tokens` is capped at `max_tokens`."""
    app = FastAPI(title=f"KernelGym model server: {name}")
    lock = threading.Lock()  # one generation at a time: the model is not shared between threads

    @app.get("/v1/models")
    def models() -> dict[str, Any]:
        return {"object": "list", "data": [{"id": name, "object": "model", "owned_by": "local"}]}

    @app.post("/v1/chat/completions")
    def complete(body: ChatRequest) -> dict[str, Any]:
        policy = LocalPolicy(model, tokenizer, device, body.temperature, body.top_p, min(body.max_tokens, max_tokens))
        with lock:
            [text], [sample] = policy.generate([[m.model_dump() for m in body.messages]])
        stopped = tokenizer.eos_token_id in sample.response_ids
        return {
            "id": f"chatcmpl-{uuid.uuid4().hex}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": name,
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": text},
                    "finish_reason": "stop" if stopped else "length",
                }
            ],
            "usage": {
                "prompt_tokens": len(sample.prompt_ids),
                "completion_tokens": len(sample.response_ids),
                "total_tokens": len(sample.prompt_ids) + len(sample.response_ids),
            },
        }

    return app


def serve(
    model_path: str,
    gguf_file: str | None = None,
    name: str | None = None,
    host: str = "127.0.0.1",
    port: int = 8300,
    device: str = "cpu",
    dtype: str = "float32",
) -> None:
    import uvicorn

    from rl_client.local.policy import load_pretrained

    model, tokenizer = load_pretrained(model_path, gguf_file, dtype, device)
    app = create_model_app(model, tokenizer, name or gguf_file or model_path, device)
    uvicorn.run(app, host=host, port=port, log_level="info")
