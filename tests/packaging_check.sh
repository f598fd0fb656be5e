#!/usr/bin/env bash
# Build the (non-editable) wheels of the two distributions, convergence and the simulated cloud
# (convergence-simcloud, simcloud/), install the main one into a fresh virtualenv and use it
# from outside the repository: the schema migrations, the template schemas and the CLI must
# all come from the installed package. The main wheel carries no simulated cloud: without it
# the demo says how to install it; with the simulated cloud's wheel added (the `simcloud`
# extra), the demo runs. Too slow for every test run (wheel builds and a dependency install);
# tests/unit/test_packaging.py checks the declarations it relies on in a fraction of a second.
#
#   tests/packaging_check.sh [WORK_DIR]     # default: a fresh temporary directory
#
# Needs network or a package index for the dependencies. Exits non-zero on the first failure.
set -euo pipefail

repo="$(cd "$(dirname "$0")/.." && pwd)"
work="${1:-$(mktemp -d -t convergence-wheel-XXXXXX)}"
python="${PYTHON:-python3}"
mkdir -p "$work"
echo "packaging check in $work"

# --- build the wheel from a copy, so the checkout gets no build/ or egg-info droppings -------
src="$work/src"
rm -rf "$src" "$work/wheel"
mkdir -p "$src"
tar -C "$repo" --exclude=.venv --exclude=.git --exclude=build --exclude='*.egg-info' \
    --exclude=__pycache__ --exclude='.*_cache' -cf - . | tar -C "$src" -xf -
"$repo/.venv/bin/python" -m pip wheel --quiet --no-deps -w "$work/wheel" "$src"
"$repo/.venv/bin/python" -m pip wheel --quiet --no-deps -w "$work/wheel" "$src/simcloud"
wheel="$(ls "$work"/wheel/convergence-[0-9]*.whl)"
simwheel="$(ls "$work"/wheel/convergence_simcloud-*.whl)"
echo "built $(basename "$wheel") and $(basename "$simwheel")"

# --- what the wheel must carry ----------------------------------------------------------------
listing="$(unzip -Z1 "$wheel")"
for expected in \
    convergence/store/alembic.ini \
    convergence/store/migrations/env.py \
    convergence/store/migrations/script.py.mako \
    convergence/store/migrations/versions/0001_initial.py \
    convergence/template/schemas/hot-template.schema.json \
    convergence/template/schemas/environment.schema.json \
    convergence/py.typed; do
    grep -qx "$expected" <<<"$listing" || { echo "MISSING from the wheel: $expected"; exit 1; }
done
shipped=$(grep -c '^convergence/store/migrations/versions/[0-9].*\.py$' <<<"$listing")
present=$(ls "$repo"/convergence/store/migrations/versions/[0-9]*.py | wc -l)
[ "$shipped" -eq "$present" ] || { echo "wheel has $shipped migrations, checkout $present"; exit 1; }
echo "wheel carries the migrations ($shipped), alembic.ini, script.py.mako and the schemas"

# --- the simulated cloud is in its own wheel, and only there ----------------------------------
if grep -E '^convergence(_simcloud|/simcloud)/' <<<"$listing"; then
    echo "the main wheel carries the simulated cloud (above)"; exit 1
fi
simlisting="$(unzip -Z1 "$simwheel")"
for expected in convergence_simcloud/__init__.py convergence_simcloud/app.py \
    convergence_simcloud/embedded.py convergence_simcloud/py.typed; do
    grep -qx "$expected" <<<"$simlisting" || { echo "MISSING from $simwheel: $expected"; exit 1; }
done
if grep -E '^(convergence|workers)/' <<<"$simlisting"; then
    echo "the simulated cloud's wheel carries the engine (above)"; exit 1
fi
echo "the main wheel has no simulated cloud; $(basename "$simwheel") has it"

# --- install into a fresh virtualenv and run from outside the repository ----------------------
venv="$work/venv"
rm -rf "$venv"
"$python" -m venv "$venv"
"$venv/bin/pip" install --quiet "$wheel"
run="$work/run"
mkdir -p "$run"
cd "$run"
export CONVERGENCE_DATABASE_URL="sqlite:///$run/check.db"
rm -f "$run/check.db"

"$venv/bin/convergence" --help >/dev/null
"$venv/bin/convergence" db upgrade
"$venv/bin/python" - "$run/check.db" <<'EOF'
import sqlite3, sys
import convergence
from convergence.store.db import head_revisions
assert "site-packages" in convergence.__file__, convergence.__file__
db = sqlite3.connect(sys.argv[1])
tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
(version,), = db.execute("SELECT version_num FROM alembic_version")
for needed in ("stacks", "templates", "resources", "traversals", "events", "alembic_version"):
    assert needed in tables, (needed, sorted(tables))
assert {version} == set(head_revisions()), (version, head_revisions())
print(f"schema at head {version}: {len(tables)} tables")
EOF
"$venv/bin/convergence" template validate "$repo/examples/web-stack.yaml" \
    -e "$repo/examples/web-stack-env.yaml"

# --- a production install: no simulated cloud, and the commands that need one say so ----------
if "$venv/bin/python" -c "import convergence_simcloud" 2>/dev/null; then
    echo "the main wheel alone installed the simulated cloud"; exit 1
fi
for command in demo simcloud; do
    set +e
    said="$("$venv/bin/convergence" "$command" 2>&1 >/dev/null)"
    code=$?
    set -e
    [ "$code" -eq 1 ] && grep -qF "pip install 'convergence[simcloud]'" <<<"$said" || {
        echo "convergence $command without the simulated cloud: exit $code: $said"; exit 1; }
done
echo "without the simulated cloud, demo and simcloud say how to install it"

# --- the `simcloud` extra, from the simulated cloud's wheel (the rest is installed already) ---
"$venv/bin/pip" install --quiet --no-index --find-links "$work/wheel" "$wheel[simcloud]"
"$venv/bin/convergence" demo --examples-dir "$repo/examples" >/dev/null
echo "demo ran on the installed wheels"
echo "packaging check passed"
