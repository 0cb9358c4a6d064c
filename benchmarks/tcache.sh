# Sourced by the GPU scripts: Triton's compile cache and autotune results across device
# calls (each call gets a bare machine; FLA's first forward + backward compiles and
# autotunes for minutes per variant).
#
# tcache_restore: TRITON_CACHE_DIR (TCACHE_DIR, default /tmp/tcache) with autotuning
# results cached, filled from benchmarks/autotune_cache/ (committed: FLA's autotune
# results, a few KB each, keyed by Triton on its version, the GPU's target, the kernel's
# source and the tuning key, so a result is used only where all of those match; FLA then
# compiles its chosen configuration alone instead of every one) and from .tcache/part*
# (carried, git-ignored: the whole compile cache of an earlier call of this session).
# tcache_pack DIR [CACHE_PARENT]: the cache back as DIR/tcache.part* (xz, 15 MB pieces,
# within the device tool's file limits; copy them into .tcache/ for the next call) and
# FLA's autotune results as DIR/autotune.tar (untar it into benchmarks/autotune_cache/
# and commit it).  At most 8 files come back from a call, and the pieces are the first
# left out (session 44): a call that must bring autotune.tar back keeps its other files
# few, or removes the pieces.
TCACHE_DIR="${TCACHE_DIR:-/tmp/tcache}"

tcache_restore() {
    export TRITON_CACHE_DIR="$TCACHE_DIR" TRITON_CACHE_AUTOTUNING=1
    mkdir -p "$TRITON_CACHE_DIR"
    # the pieces as the device tool brings them back (tcache.partaa, ...) or renamed (partaa, ...)
    if compgen -G ".tcache/*part*" >/dev/null; then
        cat .tcache/*part* | xz -d | tar -x -C "$(dirname "$TRITON_CACHE_DIR")" \
            && echo "Triton cache: $(du -sh "$TRITON_CACHE_DIR" | cut -f1) restored"
    fi
    if [ -d benchmarks/autotune_cache ]; then
        (cd benchmarks/autotune_cache && find . -name '*.autotune.json' | while read -r f; do
            mkdir -p "$TRITON_CACHE_DIR/$(dirname "$f")" && cp "$f" "$TRITON_CACHE_DIR/$f"; done)
        echo "autotune results: $(find benchmarks/autotune_cache -name '*.autotune.json' | wc -l) restored"
    fi
}

# Our own kernels are left out: they change with every regeneration (and the fp32 ones
# are hundreds of MB of FMA-loop PTX), while FLA's compiles and autotune results are what
# takes minutes.
OURS='"name": "_(intra|intra_wide|scan|state|out|dstate[a-z_]*|dgrad[a-z_]*|recurrent)_kernel"'
tcache_pack() {
    local parent="${2:-$(dirname "$TCACHE_DIR")}" base
    base="$(basename "$TCACHE_DIR")"
    ( cd "$parent" && grep -l -E "$OURS" "$base"/*/*.json 2>/dev/null | cut -d/ -f1-2 | sort -u > /tmp/tcache_ours.txt
      tar -cf - --exclude-from=/tmp/tcache_ours.txt "$base" ) | xz -T0 -6 | split -b 15M - "$1/tcache.part"
    ( cd "$parent/$base" && find . -name '*.autotune.json' ! -name '_*_kernel.autotune.json' -print0 \
        | tar -cf "$1/autotune.tar" --null -T - )
}
