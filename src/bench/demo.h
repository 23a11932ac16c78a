// The main job (tjc demo): trace the tiny Llama, optimize and compile it,
// prefill 16 tokens and decode 8, checked against the interpreter (the same
// tokens, logits within 1e-4), with the time of each stage. Throws a
// tj::Error when the compiled results differ.
#pragma once

namespace tj::bench {

void run_demo();

}  // namespace tj::bench
