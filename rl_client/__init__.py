"""The RL client: trains LLMs to write Triton kernels with multi-turn RL, getting every reward from the
KernelGym service over HTTP. It never imports the service's packages."""
