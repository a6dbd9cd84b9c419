enum Placeholder9842 {}
