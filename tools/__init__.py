"""Developer tools: the Ascend lowering audit."""
