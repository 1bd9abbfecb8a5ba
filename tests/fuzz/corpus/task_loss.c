1
// kevo task loss
// kevo size B=32 C=10
// kevo input logits f32[B, C] normal(0, 2)
// kevo input labels i64[B] randint(0, C)
// kevo output l f32[]
// kevo scalar eps f32 1e-5
// kevo bytes 4*B*C + 8*B + 4
// kevo flops 3*B*C on fp32
// kevo call xent(logits, labels, l, B, C, eps)
