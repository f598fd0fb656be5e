#!/usr/bin/env bash
# Build a (non-editable) wheel, install it into a fresh virtualenv and use it from outside the
# repository: the schema migrations, the template schemas and the CLI must all come from the
# installed package. Too slow for every test run (a wheel build and a dependency install);
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
wheel="$(ls "$work"/wheel/convergence-*.whl)"
echo "built $(basename "$wheel")"

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
"$venv/bin/convergence" demo --examples-dir "$repo/examples" >/dev/null
echo "demo ran on the installed wheel"
echo "packaging check passed"
