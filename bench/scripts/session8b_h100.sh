#!/usr/bin/env bash
# Session 8, second half: the small-kernel offset again (the range profiler's
# gpu__time_duration now counted with the kernel records' instrumentation stopped) and
# the CUDA backend's tests (the new profile test). Everything in $OUT/s8b.tar.gz but the
# two tables.
export LD_LIBRARY_PATH=$PWD/build-gpu/devlib:${LD_LIBRARY_PATH:-}
bash bench/scripts/offset_h100.sh build-gpu $OUT/off > $OUT/offset.txt 2>&1
cat $OUT/offset.txt
build-gpu/tests/test_backend_cuda > $OUT/test_backend_cuda.txt 2>&1
tail -8 $OUT/test_backend_cuda.txt; grep "profile\|timing" $OUT/test_backend_cuda.txt
cd $OUT && tar czf s8b.tar.gz off test_backend_cuda.txt && rm -rf off
