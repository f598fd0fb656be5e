"""Heat's own resource types (``OS::Heat::*``), with Heat's property and attribute schemas."""
