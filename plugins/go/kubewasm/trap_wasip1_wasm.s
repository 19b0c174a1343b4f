// trap, declared in component_wasip1.go: the WebAssembly `unreachable` instruction.

#include "textflag.h"

TEXT ·trap(SB), NOSPLIT, $0-0
	UNDEF
