"""Fuzzing: parser targets (targets.py), atheris harnesses (run.py), the whole-CLI mutation fuzzer (cli_fuzz.py)."""
