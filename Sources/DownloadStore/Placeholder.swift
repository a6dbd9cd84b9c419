enum Placeholder10622 {}
