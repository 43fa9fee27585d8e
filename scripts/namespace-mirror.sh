# Sourced by scripts/lint-imports.sh and scripts/typecheck.sh: make "$mirror", a throw-away copy of the
# checkout "$root" laid out as the import namespace is (saintpipe/ with services/ and trainer/ inside it).
# saintpipe.services and saintpipe.trainer live in the top-level services/ and trainer/ folders
# (pyproject.toml's package-dir mapping), which import-linter and mypy cannot follow as they lie.
# Sets a trap that removes the copy on exit; the caller names its prefix in $mirror_prefix.
mirror="$(mktemp -d "${TMPDIR:-/tmp}/${mirror_prefix:-saintpipe-mirror}.XXXXXX")"
trap 'rm -rf "$mirror"' EXIT
tar -C "$root" --exclude=__pycache__ -cf - saintpipe | tar -C "$mirror" -xf -
tar -C "$root" --exclude=__pycache__ -cf - services trainer | tar -C "$mirror/saintpipe" -xf -
