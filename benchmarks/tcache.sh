# Sourced by gpu_run.sh and gpu_campaign.sh: Triton's compile cache and autotune results
# across device calls (each call gets a bare machine; FLA's first forward + backward
# compiles and autotunes for minutes per variant).  tcache_restore unpacks .tcache/part*
# (carried, git-ignored) into TRITON_CACHE_DIR; tcache_pack DIR writes it back as
# DIR/tcache.part* (xz, 15 MB pieces, within the device tool's file limits); copy those
# into .tcache/ for the next call.
tcache_restore() {
    export TRITON_CACHE_DIR=/tmp/tcache TRITON_CACHE_AUTOTUNING=1
    mkdir -p "$TRITON_CACHE_DIR"
    # the pieces as the device tool brings them back (tcache.partaa, ...) or renamed (partaa, ...)
    if compgen -G ".tcache/*part*" >/dev/null; then
        cat .tcache/*part* | xz -d | tar -x -C /tmp && echo "Triton cache: $(du -sh /tmp/tcache | cut -f1) restored"
    fi
}

# Our own kernels are left out: they change with every regeneration (and the fp32 ones
# are hundreds of MB of FMA-loop PTX), while FLA's compiles and autotune results are what
# takes minutes.  tcache_pack DIR [CACHE_PARENT]
tcache_pack() {
    local parent="${2:-/tmp}"
    ( cd "$parent" && grep -l -E '"name": "_(intra|scan|state|out|dstate[a-z_]*|dgrad[a-z_]*)_kernel"' tcache/*/*.json \
        2>/dev/null | cut -d/ -f1-2 | sort -u > /tmp/tcache_ours.txt
      tar -cf - --exclude-from=/tmp/tcache_ours.txt tcache ) | xz -T0 -6 | split -b 15M - "$1/tcache.part"
}
