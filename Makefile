# Supersede: `make reproduce` (all studies, embedded model, no API key) and `make test`.
# Both create .venv on first use. PROFILE picks configs/<profile>.yaml.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
PROFILE ?= local
PYTEST_ARGS ?=
REPRODUCE_ARGS ?=  # e.g. --only 02,03; --live (every model call again); --record (regenerate the record on purpose)
BENCH_ARGS ?=

.PHONY: setup test lint bench reachable reproduce verify report clean-outputs gpu-resolve gpu-check

$(VENV)/.installed: requirements.txt pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -r requirements.txt
	$(PY) -m pip install -q --no-deps -e .
	$(PY) -m ipykernel install --sys-prefix --name python3 >/dev/null
	touch $@

setup: $(VENV)/.installed  ## install everything into .venv

test: setup  ## run the test suite
	$(PY) -m pytest -q $(PYTEST_ARGS)

lint: setup  ## ruff
	$(VENV)/bin/ruff check supersede_lib supersede.py tests notebooks
	$(VENV)/bin/ruff format --check supersede_lib supersede.py tests notebooks

bench: setup  ## speed, overhead and engine benchmarks (not part of `make test`); BENCH_ARGS=--quick for a short run
	$(PY) -m supersede_lib bench $(BENCH_ARGS)

# reachable: before installing, whether PROFILE's downloads (LongMemEval, GGUF files) can be fetched;
# offline it stops with one line naming what to run instead (standard library only, any python3)
reachable:
	@$(PYTHON) -m supersede_lib reachable $(PROFILE) $(REPRODUCE_ARGS)

reproduce: reachable setup  ## notebooks 01-07 for PROFILE: replayed and checked when it has a committed record, else run
	$(PY) -m supersede_lib reproduce --profile $(PROFILE) $(REPRODUCE_ARGS)

# verify: every profile with a committed record (offline, cpu_proof, cpu_proof_prereg), or PROFILE=X alone
VERIFY_ARGS := $(if $(filter command line environment,$(origin PROFILE)),--profile $(PROFILE),)

verify: setup  ## replay every committed record (or PROFILE) into .replay/; check every table and REPORT.md
	$(PY) -m supersede_lib verify $(VERIFY_ARGS)

report: setup  ## write outputs/$(PROFILE)/REPORT.md from the results on disk
	$(PY) -m supersede_lib report --profile $(PROFILE)

# gpu-check: on a CUDA machine, in the Python that requirements-gpu.txt was installed into (not .venv):
# two GRPO steps of the tiny model with Unsloth (bf16, and fp16 as on a T4) and with plain PEFT, then
# the adapter's generation; ~2 minutes, report in outputs/gpu_check/.
gpu-check:  ## check the GPU training path on this machine's CUDA GPU (PYTHON=the platform's python)
	$(PYTHON) -m supersede_lib gpu-check --out outputs/gpu_check

# gpu-resolve: pip's resolver on requirements-gpu.txt for cp311 and cp312 manylinux x86_64, as on
# Colab/Kaggle (downloads large wheels: not part of `make test`). TORCH_SPEC stands in for the torch
# the platform ships (requirements-gpu.txt keeps it, so it is a constraint, not a requirement).
# pip does not expand manylinux tags for a foreign --platform, hence the explicit list.
TORCH_SPEC ?= torch==2.13.0
GPU_PYTHONS ?= 3.11 3.12
GPU_PLATFORMS := $(foreach n,$(shell seq 35 -1 17),--platform manylinux_2_$(n)_x86_64) --platform manylinux2014_x86_64
GPU_RESOLVE_DIR ?= $(or $(TMPDIR),/tmp)/supersede-gpu-resolve

gpu-resolve:  ## check that requirements-gpu.txt resolves (cp311, cp312; TORCH_SPEC=torch==X to change the stand-in)
	@mkdir -p $(GPU_RESOLVE_DIR) && echo '$(TORCH_SPEC)' > $(GPU_RESOLVE_DIR)/platform-torch.txt
	@status=0; for version in $(GPU_PYTHONS); do \
	  log=$(GPU_RESOLVE_DIR)/cp$$(echo $$version | tr -d .).log; \
	  echo "== Python $$version, platform torch stand-in: $(TORCH_SPEC)"; \
	  if $(PYTHON) -m pip install --dry-run --ignore-installed --only-binary=:all: \
	      --python-version $$version --implementation cp $(GPU_PLATFORMS) \
	      --target $(GPU_RESOLVE_DIR)/target -r requirements-gpu.txt \
	      -c $(GPU_RESOLVE_DIR)/platform-torch.txt > $$log 2>&1; then \
	    grep '^Would install' $$log | tr ' ' '\n' | grep -E '^(torch|torchvision|xformers|bitsandbytes|triton|unsloth|unsloth_zoo|trl|transformers|numpy)-[0-9]' | tr '\n' ' '; echo; \
	    echo "   resolves (full list in $$log)"; \
	  elif grep -q 'ResolutionImpossible' $$log; then \
	    status=1; echo "   CONFLICT: the requirements cannot be installed together:"; \
	    sed -n '/The conflict is caused by/,/^$$/p' $$log | sed 's/^/     /'; \
	  elif grep -qE 'No matching distribution found|Could not find a version' $$log; then \
	    status=1; echo "   NOT A CONFLICT: the package index lacks a file it needs (a mirror gap, not a pin problem):"; \
	    grep -E 'No matching distribution found|Could not find a version' $$log | sort -u | sed 's/^/     /'; \
	  else \
	    status=1; echo "   pip failed for another reason:"; tail -n 5 $$log | sed 's/^/     /'; \
	  fi; \
	done; exit $$status

