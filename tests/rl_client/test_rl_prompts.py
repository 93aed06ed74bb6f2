"""Reading kernels back out of model answers, and the turn prompts."""

from __future__ import annotations

from rl_client.prompts import cap, extract_code, first_turn, next_turn

MODULE = "import torch\n\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n        return x\n"


def test_the_last_block_defining_modelnew_wins_over_prose_and_other_blocks():
    answer = f"Let me think.\n```python\nx = 1\n```\nFinal answer:\n```python\n{MODULE}```\nDone, and ```bash\nls\n```"
    assert extract_code(answer).code == MODULE


def test_an_unclosed_final_block_is_taken():
    assert extract_code(f"Here it is:\n```python\n{MODULE}").code == MODULE


def test_unusable_answers_say_why():
    assert "no ```python```" in extract_code("I cannot do this.").problem
    assert "does not define" in extract_code("```python\nx = 1\n```").problem
    bad = extract_code("```python\nclass ModelNew(:\n    pass\n```")
    assert bad.code is None and "not valid Python" in bad.problem


def test_prompts_carry_the_reference_and_capped_feedback():
    assert "class Model(" in first_turn("class Model(nn.Module):\n    pass")
    text = next_turn("E" * 10_000, max_chars=500)
    assert "characters cut" in text and len(text) < 1_000
    assert cap("short", 10) == "short"
