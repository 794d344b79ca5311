# Every target creates or updates the local virtual environment first, so a fresh
# checkout needs nothing but `make gate` or `make test`.
PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: gate test faults bench wheel-check venv learners ray clean

$(STAMP): pyproject.toml setup.py constraints.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -c constraints.txt setuptools  # builds the wheel (tests, .ci/check_wheel)
	$(BIN)/python -m pip install --quiet -c constraints.txt -e '.[dev]'
	touch $(STAMP)

venv: $(STAMP)

# The [learners] extra (stable-baselines3 with the pinned torch CPU build) on top of .[dev].
LEARNERS_STAMP := $(VENV)/.installed-learners
$(LEARNERS_STAMP): $(STAMP)
	$(BIN)/python -m pip install --quiet -c constraints.txt -e '.[dev,learners]'
	touch $(LEARNERS_STAMP)

# The [ray] extra (Ray, for curriculum.ray_service) on top of .[dev].
RAY_STAMP := $(VENV)/.installed-ray
$(RAY_STAMP): $(STAMP)
	$(BIN)/python -m pip install --quiet -c constraints.txt -e '.[dev,ray]'
	touch $(RAY_STAMP)

## The scenario gate on the built-in curriculum.
gate: $(STAMP)
	$(BIN)/pytest scenarios/ -n auto --dist loadgroup $(ARGS)

## The whole test suite: unit, property, fault-injection and scenario tests. tests/faults/ is
## named so that its conftest (the fault figures in the summary) also loads under xdist.
## Installs nothing beyond .[dev]: the Ray service tests run when Ray is in .venv (make ray
## puts it there), and skip with the reason otherwise.
test: $(STAMP)
	$(BIN)/pytest tests/ tests/faults/ scenarios/ -n auto --dist loadgroup $(ARGS)

## The fault-injection suite alone (kills, attacks, hostile inputs), figures in the summary.
## FAULTS_SCALE=1 runs the full counts the README reports (default 0.1).
faults: $(STAMP)
	$(BIN)/pytest tests/faults/ -m faults -n auto $(ARGS)

## The wheel as a user installs it: fresh venv outside the checkout, lean and [gate], gate runs.
wheel-check: $(STAMP)
	bash .ci/check_wheel

## Speed and scaling benchmarks (not part of `make test`).
bench: $(STAMP)
	$(BIN)/pytest benchmarks/ -p no:xdist --benchmark-only $(ARGS)

## The real-learner tier: PPO through GymCurriculumEnv, learning progress vs uniform over
## 10 seeds per task family (not part of the gate; ~4 min on 2 idle cores, runs at nice 10).
learners: $(LEARNERS_STAMP)
	nice -n 10 $(BIN)/pytest scenarios/learners/ --gate-learners -n 2 --dist loadgroup $(ARGS)

## One curriculum for workers on many machines: installs the [ray] extra and runs the Ray
## service tests, the gate's Ray suite and its canary on a local two-CPU cluster (~1.5 min).
ray: $(RAY_STAMP)
	$(BIN)/pytest tests/curriculum/test_ray_service.py tests/curriculum/test_ray_node_death.py scenarios/test_ray_service.py $(ARGS)
	$(BIN)/pytest tests/scenarios/test_canaries.py -k test_ray_service $(ARGS)

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis .benchmarks
