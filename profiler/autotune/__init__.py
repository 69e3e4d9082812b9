"""The autotune loop (issue 14): the roofline analysis of each simulated trial drives fusion,
tiling and precision choices, each proved by running it (functional check, then the simulator).

space (the joint space and its candidates), build (workload, space from the compiled program,
candidate -> compiled program, plan file), strategy (roofline, random, tpe, exhaustive), runner
(the simulator runner), db (the SQLite trials table), loop (the driver), report (best, front,
per-kernel table). Floor: imports the model, the facade, analysis and accelerator; imported by
the CLI (tests/test_architecture.py)."""
