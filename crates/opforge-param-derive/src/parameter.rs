//! The expansion of `#[derive(Parameter)]`.

use crate::field::{parse_field, Default, Number, ParamFieldDef};
use crate::kind::Kind;
use proc_macro2::{Literal, TokenStream};
use quote::{quote, quote_spanned};
use syn::spanned::Spanned;
use syn::{Data, DeriveInput, Fields};

/// The path of opforge-core's API from a struct's or enum's
/// `#[param(crate = "...")]`, `::opforge_core` by default.
pub(crate) fn crate_path(input: &DeriveInput) -> syn::Result<syn::Path> {
    let mut path: Option<syn::Path> = None;
    for attr in input.attrs.iter().filter(|a| a.path().is_ident("param")) {
        attr.parse_nested_meta(|meta| {
            if meta.path.is_ident("crate") {
                if path.is_some() {
                    return Err(meta.error("duplicate param key 'crate'"));
                }
                let lit: syn::LitStr = meta.value()?.parse()?;
                path = Some(lit.parse()?);
                Ok(())
            } else {
                Err(crate::unknown_key(&meta, " on the type", "it takes: crate"))
            }
        })?;
    }
    Ok(path.unwrap_or_else(|| syn::parse_quote!(::opforge_core)))
}

fn option<T: quote::ToTokens>(value: Option<T>) -> TokenStream {
    match value {
        Some(v) => quote!(::core::option::Option::Some(#v)),
        None => quote!(::core::option::Option::None),
    }
}

fn bound(krate: &syn::Path, b: &Option<Number>) -> TokenStream {
    option(b.as_ref().map(|n| match *n {
        Number::Int(i) => {
            let lit = Literal::i64_suffixed(i);
            quote!(#krate::param::Bound::Int(#lit))
        }
        Number::Float(f) => {
            let lit = Literal::f64_suffixed(f);
            quote!(#krate::param::Bound::Float(#lit))
        }
    }))
}

/// The `AttrValue` expression of a default.
fn default_tokens(krate: &syn::Path, d: &Default) -> TokenStream {
    let p = quote!(#krate::param::__private);
    match d {
        Default::Int(i) => {
            let lit = Literal::i64_suffixed(*i);
            quote!(#p::int(#lit))
        }
        Default::Float(f) => {
            let lit = Literal::f32_suffixed(*f);
            quote!(#p::float(#lit))
        }
        Default::Bool(b) => quote!(#p::bool(#b)),
        Default::Str(s) => quote!(#p::string(#s)),
        Default::Type(t) => quote!(#p::dtype(#krate::DataType::#t)),
        Default::Ints(v) => {
            let lits = v.iter().map(|i| Literal::i64_suffixed(*i));
            quote!(#p::ints(&[#(#lits),*]))
        }
        Default::Floats(v) => {
            let lits = v.iter().map(|f| Literal::f32_suffixed(*f));
            quote!(#p::floats(&[#(#lits),*]))
        }
        Default::Bools(v) => quote!(#p::bools(&[#(#v),*])),
        Default::Strs(v) => quote!(#p::strings(&[#(#v),*])),
        Default::Types(v) => quote!(#p::dtypes(&[#(#krate::DataType::#v),*])),
    }
}

/// The `ParamField` expression of one field.
fn field_tokens(krate: &syn::Path, f: &ParamFieldDef) -> TokenStream {
    let ty = &f.ty;
    let name = &f.name;
    let description = &f.description;
    let param_type = quote!(<#ty as #krate::param::ParamType>);
    let default = match &f.default {
        // A shape default is a list of dims.
        Some(Default::Ints(dims)) if f.field_type.kind == Kind::Shape && !f.field_type.list => {
            let lits = dims.iter().map(|i| Literal::i64_suffixed(*i));
            let v = quote!(#krate::param::__private::shape(&[#(#lits),*]));
            option(Some(v))
        }
        other => option(other.as_ref().map(|d| default_tokens(krate, d))),
    };
    let enumeration = match &f.enumeration {
        Some(values) => quote!(&[#(#values),*]),
        None => quote!(#param_type::ENUMERATION),
    };
    let none = match &f.none {
        Some(Default::Ints(dims)) if f.field_type.kind == Kind::Shape && !f.field_type.list => {
            let lits = dims.iter().map(|i| Literal::i64_suffixed(*i));
            option(Some(quote!(#krate::param::__private::shape(&[#(#lits),*]))))
        }
        other => option(other.as_ref().map(|d| default_tokens(krate, d))),
    };
    let minimum = option(f.minimum.map(Literal::i64_suffixed));
    let lower = bound(krate, &f.lower_bound);
    let upper = bound(krate, &f.upper_bound);
    quote! {
        #krate::param::ParamField {
            name: #name,
            attr_type: #param_type::ATTR_TYPE,
            optional: #param_type::OPTIONAL,
            default: #default,
            none: #none,
            description: #description,
            minimum: #minimum,
            lower_bound: #lower,
            upper_bound: #upper,
            enumeration: #enumeration,
        }
    }
}

/// A compile-time check that an enum field's default names a variant.
fn enum_default_check(krate: &syn::Path, f: &ParamFieldDef) -> TokenStream {
    let (Some(Default::Str(value)), Kind::Enum) = (&f.default, f.field_type.kind) else {
        return TokenStream::new();
    };
    let ty = &f.ty;
    let message = format!(
        "the default '{value}' of field '{}' is not a variant name of its enum",
        f.name
    );
    quote_spanned! {f.default_span=>
        const _: () = #krate::param::__private::assert_listed(
            <#ty as #krate::param::ParamType>::ENUMERATION,
            #value,
            #message,
        );
    }
}

/// Expands `#[derive(Parameter)]`.
pub(crate) fn expand(input: &DeriveInput) -> syn::Result<TokenStream> {
    let krate = crate_path(input)?;
    let ident = &input.ident;
    if !input.generics.params.is_empty() {
        return Err(syn::Error::new(
            input.generics.span(),
            "a Parameter struct cannot be generic",
        ));
    }
    let fields = match &input.data {
        Data::Struct(s) => match &s.fields {
            Fields::Named(named) => &named.named,
            _ => {
                return Err(syn::Error::new(
                    ident.span(),
                    "Parameter derives only for structs with named fields",
                ))
            }
        },
        _ => return Err(syn::Error::new(
            ident.span(),
            "Parameter derives only for structs with named fields (derive ParamEnum for an enum)",
        )),
    };
    let mut defs: Vec<ParamFieldDef> = Vec::new();
    let mut errors: Option<syn::Error> = None;
    for field in fields {
        match parse_field(field) {
            Ok(def) => {
                if !def.flatten && defs.iter().any(|d| !d.flatten && d.name == def.name) {
                    let e = syn::Error::new(
                        def.ident.span(),
                        format!("two fields have the attr name '{}'", def.name),
                    );
                    errors.get_or_insert(e.clone()).combine(e);
                }
                defs.push(def);
            }
            Err(e) => match &mut errors {
                Some(all) => all.combine(e),
                None => errors = Some(e),
            },
        }
    }
    if let Some(e) = errors {
        return Err(e);
    }
    let name = ident.to_string();
    let param = quote!(#krate::param::Parameter);
    // How many values each field takes: one, or a flattened struct's.
    let counts: Vec<TokenStream> = defs
        .iter()
        .map(|f| {
            let ty = &f.ty;
            if f.flatten {
                quote!(<#ty as #param>::FIELD_COUNT)
            } else {
                quote!(1usize)
            }
        })
        .collect();
    let pushes = defs.iter().map(|f| {
        let ty = &f.ty;
        if f.flatten {
            quote!(fields.extend(<#ty as #param>::fields());)
        } else {
            let field = field_tokens(&krate, f);
            quote!(fields.push(#field);)
        }
    });
    let checks = defs.iter().map(|f| enum_default_check(&krate, f));
    let takes = defs.iter().enumerate().map(|(i, f)| {
        let (field_ident, ty, attr) = (&f.ident, &f.ty, &f.name);
        let before = &counts[..i];
        let at = quote!(0usize #(+ #before)*);
        if f.flatten {
            quote! {
                #field_ident: <#ty as #param>::from_values(
                    owner,
                    values
                        .get(#at..#at + <#ty as #param>::FIELD_COUNT)
                        .unwrap_or(&[]),
                )?
            }
        } else {
            quote! {
                #field_ident: #krate::param::__private::take::<#ty>(owner, #attr, values.get(#at))?
            }
        }
    });
    Ok(quote! {
        #(#checks)*

        impl #param for #ident {
            const NAME: &'static str = #name;
            const FIELD_COUNT: usize = 0usize #(+ #counts)*;

            fn fields() -> ::std::vec::Vec<#krate::param::ParamField> {
                let mut fields = ::std::vec::Vec::with_capacity(Self::FIELD_COUNT);
                #(#pushes)*
                fields
            }

            fn from_values(
                owner: &str,
                values: &[::core::option::Option<#krate::proto::AttrValue>],
            ) -> #krate::Result<Self> {
                ::core::result::Result::Ok(#ident { #(#takes),* })
            }
        }
    })
}
