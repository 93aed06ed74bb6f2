"""The trusted side: the stages the orchestrator (`services.evaluator`) runs, one module each, all in the parent.

- `link`: the link to one evaluation's children (its secrets, the requests and the tensors they hand over);
  `Link.ask` turns every way a child can fail into a verdict;
- `record`: the evaluation's checks and the evidence the defences gather;
- `load`: static triage, starting the children, loading the models;
- `precompile`: the compiler child's pass while the models load, and the copy of what it compiled;
- `correctness`: correctness trials and hidden sizes;
- `timing`: the timed calls and their statistics;
- `profile`: custom-kernel coverage from the profiler;
- `defences`: re-checks, wall-clock and side-stream checks, the roofline floor;
- `evidence`: the pure judgement of what the candidate child's guards and profiler reported.
"""
