# Sourced by scripts/test: `build_once ALLOWED CMD...` runs a build command,
# shows what it prints, and fails when it compiled a crate of this workspace
# other than those ALLOWED (an extended regex of crate names; '' for none).
# Every crate is compiled once for all the builds of a script; a workspace
# crate compiled again means a later build reached a dependency with other
# features, or made another unit of it (see crates/opforge-workspace-hack).
build_once() {
    local allowed=$1
    shift
    local log
    log=$(mktemp)
    { "$@" 2>&1; echo $? >"$log.rc"; } | tee "$log"
    local rc
    rc=$(cat "$log.rc")
    rm -f "$log.rc"
    if [ "$rc" -ne 0 ]; then
        rm -f "$log"
        return "$rc"
    fi
    local again
    again=$(sed -nE 's/^ *Compiling (opforge[a-z_-]*|zero_out|median_pool) v.*/\1/p' "$log" | sort -u)
    rm -f "$log"
    if [ -n "$allowed" ]; then
        again=$(grep -vxE "$allowed" <<<"$again" || true)
    fi
    if [ -n "$again" ]; then
        echo "error: \`$*\` compiled again what an earlier build compiled: $(echo $again)" >&2
        echo "  a dependency is built another way: run \`cargo hakari generate\`" \
            "(crates/opforge-workspace-hack/Cargo.toml tells why)" >&2
        return 1
    fi
}
