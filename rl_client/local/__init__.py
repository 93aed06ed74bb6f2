"""The local backend: one process, one device, a Hugging Face causal LM; for small models and tests."""
