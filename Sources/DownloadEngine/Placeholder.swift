enum Placeholder5845 {}
