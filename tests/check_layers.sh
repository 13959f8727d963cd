#!/usr/bin/env bash
# The layers depend one way (docs/design.md section 2, "Layers and dependency direction"): a source
# file may include headers of its own layer and of the layers below it, never of a layer above, and
# nothing outside tests/ includes a header of tests/. Prints every include that breaks this, with
# its file and line. CTest runs it as layers_include_downward.
#   check_layers.sh [SOURCE_ROOT]
set -euo pipefail
root="${1:-$(dirname "$0")/..}"
cd "$root"

# What each layer may include besides itself and the public header (terse/terse.h). The codecs
# include common/ alone: the policy, residual memory and tensor keys that use them are the
# compression engine's (collectives/compressed/policy/, collectives/compressed/memory/).
declare -A allowed=(
  [common]=""
  [topology]="common"
  [transport]="common topology"
  [codecs]="common"
  [collectives]="common topology transport codecs"
  [ps]="common topology transport codecs collectives"
  [plugin]="common topology transport codecs collectives ps"
  [model]="common topology transport codecs collectives"
  [perf]="common topology transport codecs collectives ps plugin model"
)
layers="${!allowed[*]}"

# Every header's name in the tree, once: "tests" for a name found only under tests/, "tree" for
# one found elsewhere too (where a bare include name can come from).
declare -A header_home=()
while read -r path; do
  name="${path##*/}"
  if [[ "$path" == ./tests/* ]]; then
    header_home[$name]="${header_home[$name]:-tests}"
  else
    header_home[$name]=tree
  fi
done < <(find . \( -path './build*' -o -path '*/.*' \) -prune -o -type f \( -name '*.h' -o -name '*.cuh' \) -print)

status=0
for layer in $layers; do
  [ -d "$layer" ] || continue
  while IFS=: read -r file line text; do
    [[ "$text" =~ ^#include\ \"([^\"]+)\" ]] || continue
    target="${BASH_REMATCH[1]}"
    # A path beside the including file or in its own subfolder.
    [ -f "${file%/*}/$target" ] && continue
    if [[ "$target" == */* ]]; then
      top="${target%%/*}"
      [ "$top" = "$layer" ] || [ "$top" = terse ] && continue
      if [[ " $layers " != *" $top "* ]] || [ ! -d "$top" ]; then
        echo "$file:$line: $layer includes \"$target\", which is not a layer's header"
        status=1
      elif [[ " ${allowed[$layer]} " != *" $top "* ]]; then
        echo "$file:$line: $layer includes \"$target\" ($top is not below $layer)"
        status=1
      fi
    else
      # A bare name found through an include folder: one that exists nowhere but under tests/
      # breaks the rule.
      if [ "${header_home[$target]:-}" = tests ]; then
        echo "$file:$line: $layer includes \"$target\", a header found only under tests/"
        status=1
      fi
    fi
  # Hidden folders (a local perf/.venv, say) are not the project's sources.
  done < <(grep -rnE '^#include "' "$layer" --exclude-dir='.*' --include='*.h' --include='*.cpp' \
             --include='*.cu' --include='*.cuh' --include='*.c' || true)
done
[ "$status" -eq 0 ] && echo "check_layers.sh: every include points down or sideways within its layer"
exit "$status"
