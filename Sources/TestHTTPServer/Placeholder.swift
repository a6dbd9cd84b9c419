enum Placeholder2768 {}
