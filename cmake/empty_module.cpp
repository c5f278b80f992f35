// Placeholder source for a module folder that has no sources yet (CMake needs one).
