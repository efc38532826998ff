# Sourced by setup.sh, python_env.sh and test.sh: stops with a clear message
# when a file system lacks the room a step needs, before it fails midway on
# a full disk (a pip install or a link, with a less clear error).
#   need_space GIB WHAT [DIR]     DIR: where it goes (default: the checkout)
need_space() {
  local dir="${3:-.}" avail_mib
  avail_mib=$(df -P -BM "$dir" 2>/dev/null | awk 'NR == 2 { sub("M", "", $4); print $4 }')
  case "$avail_mib" in ''|*[!0-9]*) return 0 ;; esac  # df cannot tell: go on
  if [ "$avail_mib" -lt $(($1 * 1024)) ]; then
    echo "$(basename "$0"): about $1 GiB must be free on the file system of $(cd "$dir" && pwd) for" \
         "$2; $((avail_mib / 1024)) GiB is. Free some space and run this again." >&2
    exit 1
  fi
}
