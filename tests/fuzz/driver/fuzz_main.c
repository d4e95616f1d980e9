/*
 * The libFuzzer entry of one target (make fuzz builds this file once per
 * target with -DTF_TARGET=<index into tf_targets>).
 */
#include "tests/fuzz/fuzz_targets.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	return tf_targets[TF_TARGET].fn(data, size);
}
