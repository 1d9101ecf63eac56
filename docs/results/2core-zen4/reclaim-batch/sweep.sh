#!/bin/bash
# One round: every batch size, one table marked and every table marked.
bin=$1; round=$2
for b in 1024 4096 8192 16384 32768 65536; do
  for m in one all; do
    if [ $m = all ]; then export PAYGO_MARK_ALL=1; else unset PAYGO_MARK_ALL; fi
    PAYGO_BATCH=$b $bin run drop-file --schemes paygo --objects 256 --threads 1 --reps 7 --size-cpus 16 --pin 2>&1 \
      | awk -v b=$b -v m=$m -v r=$round '$1=="drop-file" && /background=0/ {for(i=1;i<=NF;i++) if($i ~ /^ns_per_page=/) {split($i,a,"="); print r, m, b, a[2]}}'
  done
done
